"""ingest (chunking, the content filter, novelty) and what explicit remember shares with it: units on
the pure parts, the engine on a real database, the tool over a real MCP client, the CLI."""

from __future__ import annotations

import json

import pytest

from memlane.pipeline.config import (
    EngineConfig,
    FilterConfig,
    IngestConfig,
)
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.remember import chunking, content_filter
from memlane.pipeline.tokens import count_tokens
from memlane.server.cli.main import main

pytestmark = pytest.mark.anyio

CONVERSATION = """\
Caroline: Hey Mel, good to see you!
Melanie: ok
Caroline: I went to the LGBTQ support group yesterday and it was so powerful.
Melanie: thanks!
Melanie: We decided to move the launch of the pottery class to March 3; the deadline is firm.
It will be held at the community centre on Elm Street.
Caroline: lol
"""

DOCUMENT = "\n\n".join(
    " ".join(
        f"Paragraph {p} sentence {s} explains how the {word} service handles retries and backoff."
        for s, word in enumerate(["billing", "search", "checkout", "auth", "payments", "gateway"])
    )
    for p in range(6)
)


# -- chunking ---------------------------------------------------------------------------------------


def test_turns_are_speaker_lines_and_continuations_belong_to_the_turn_before():
    turns = chunking.split_turns(CONVERSATION)
    assert [t.speaker for t in turns] == ["Caroline", "Melanie", "Caroline", "Melanie", "Melanie", "Caroline"]
    assert turns[4].text.endswith(
        "March 3; the deadline is firm.\nIt will be held at the community centre on Elm Street."
    )
    # A time or a URL at the start of a line is not a speaker.
    [t] = chunking.split_turns("Bob: meet at\n10:30 at https://example.org please")
    assert t.speaker == "Bob" and "10:30" in t.text


def test_message_lists_as_json_with_string_or_text_block_content():
    text = json.dumps(
        [
            {"role": "user", "content": "I moved to Lisbon last month."},
            {"role": "assistant", "content": [{"type": "text", "text": "Noted."}, {"type": "image"}]},
            {"role": "user", "content": ""},
        ]
    )
    turns = chunking.split_turns(text)
    assert [(t.speaker, t.text) for t in turns] == [
        ("user", "I moved to Lisbon last month."),
        ("assistant", "Noted."),
    ]
    with pytest.raises(InvalidInput, match="message 0"):
        chunking.split_turns('[{"role": "user"}]')
    with pytest.raises(InvalidInput, match="content must be"):
        chunking.split_turns('[{"role": "user", "content": 5}]')


@pytest.mark.parametrize(("max_tokens", "overlap"), [(40, 0), (40, 12), (64, 20), (200, 30)])
def test_token_chunks_respect_the_limit_keep_the_order_and_overlap(max_tokens, overlap):
    chunks = chunking.chunk_tokens(DOCUMENT, max_tokens, overlap)
    assert len(chunks) > 1
    assert all(count_tokens(c) <= max_tokens for c in chunks)
    # Every sentence is in some chunk, and first appearances follow the document's order.
    sentences = [s for s, _ in chunking.sentences(DOCUMENT)]
    firsts = [next(i for i, c in enumerate(chunks) if s in c) for s in sentences]
    assert firsts == sorted(firsts)
    # Each chunk but the first starts with the end of the previous one when overlap is on.
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        first_sentence = chunking.sentences(nxt)[0][0]
        assert (first_sentence in prev) == bool(overlap) or count_tokens(first_sentence) > overlap
    # Chunks end at sentence ends, never mid-sentence.
    assert all(c.endswith(".") for c in chunks)


def test_a_sentence_longer_than_the_limit_is_cut_at_token_boundaries():
    long = "word " * 300 + "end."
    chunks = chunking.chunk_tokens(long, 50, 0)
    assert all(count_tokens(c) <= 50 for c in chunks) and len(chunks) >= 6
    assert "".join(chunks).replace(" ", "") == long.replace(" ", "")


def test_semantic_chunks_cut_where_the_topic_changes(embedder):
    text = (
        "The billing service retries failed card payments three times. Billing sends invoices on the first "
        "of the month. Refunds in billing take five business days. "
        "Our cat Miso loves sleeping on the sofa. Miso eats salmon every evening. The cat hides from the vacuum."
    )
    chunks = chunking.chunk_semantic(text, embedder.embed_batch, threshold=0.3, max_tokens=200, min_tokens=5)
    assert len(chunks) >= 2
    assert any("billing" in c.lower() and "miso" not in c.lower() for c in chunks)
    assert any("miso" in c.lower() and "billing" not in c.lower() for c in chunks)
    assert " ".join(chunks) == text  # nothing lost, order kept (no overlap in this strategy)
    # max_tokens still bounds a chunk; tiny chunks are merged into a neighbour.
    assert all(
        count_tokens(c) <= 30
        for c in chunking.chunk_semantic(
            text, embedder.embed_batch, threshold=-1, max_tokens=30, min_tokens=0
        )
    )
    merged = chunking.chunk_semantic(
        text, embedder.embed_batch, threshold=1.01, max_tokens=200, min_tokens=40
    )
    assert all(count_tokens(c) >= 20 for c in merged[:-1])


# -- the content filter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["ok", "Ok!", "thanks", "Thank you so much!", "got it", "lol", "sounds good", "haha", "Yep.", "bye!"],
)
def test_acknowledgements_are_dropped(text):
    v = content_filter.judge(text, EngineConfig(filter=FilterConfig(min_chars=0)))
    assert not v.keep and "exclude pattern" in v.reason


@pytest.mark.parametrize(
    "text",
    [
        "We decided to use PostgreSQL for billing.",
        "I will send the report by Friday.",
        "Let's ship it on Monday.",
        "The deadline for the grant is June 30.",
        "Alice prefers tabs over spaces in Python projects.",
        "I went to the LGBTQ support group yesterday and it was so powerful.",
        "My daughter just started playing the violin.",
    ],
)
def test_facts_and_decisions_are_kept(text):
    v = content_filter.judge(text, EngineConfig())
    assert v.keep, v.reason


def test_short_and_low_information_pieces_are_dropped_with_the_reason():
    cfg = EngineConfig()
    assert "too short" in content_filter.judge("hm yes", cfg).reason
    low = content_filter.judge("that is so so good, is it not?", cfg)
    assert not low.keep and "low information" in low.reason
    # The threshold is configuration: 0 keeps everything that passes length and patterns.
    assert content_filter.judge(
        "that is so so good, is it not?", EngineConfig(filter=FilterConfig(autosave_threshold=0))
    ).keep
    # The cue and the weights count: a decision in common words passes on its cue alone.
    cue_only = "we will do it then"
    assert content_filter.judge(cue_only, EngineConfig(filter=FilterConfig(min_chars=0))).keep
    assert not content_filter.judge(
        cue_only, EngineConfig(filter=FilterConfig(min_chars=0, cue_weight=0))
    ).keep


# Assistant-style turns written for this test (not from LoCoMo, which the defaults were checked on),
# labelled by hand: KEEP holds what a memory should keep (facts, preferences, decisions, plans,
# events), DROP conversational filler.
ASSISTANT_KEEP = [
    "I'm allergic to penicillin, so keep that in mind for anything medical.",
    "We moved the standup to 9:30 starting next week.",
    "My sister Ana is visiting from Porto in October.",
    "Use pnpm, not npm, in this repository.",
    "The staging database password rotates every 90 days.",
    "I prefer short answers with code first.",
    "Let's call the new service ledger.",
    "I'll be offline from Friday until the 14th.",
    "Our budget for the offsite is 12k euros.",
    "I switched from VS Code to Neovim last month.",
    "The client wants the mockups by Thursday noon.",
    "My son plays the cello in the school orchestra.",
    "We agreed to drop support for Python 3.8.",
    "I run every morning before work, usually 5k.",
    "The outage was caused by an expired TLS certificate on the gateway.",
    "Remind me to renew my passport before March.",
    "I don't eat pork.",
    "Deploys are frozen during the last week of December.",
]
ASSISTANT_DROP = [
    "ok",
    "Thanks!",
    "Got it, thanks.",
    "lol",
    "Sounds good!",
    "Sure, go ahead.",
    "Yes please.",
    "Hmm, let me think.",
    "That's great!",
    "Perfect, thank you so much!",
    "Can you say that again?",
    "Cool cool.",
    "Nice one!",
    "Oh wow, really?",
    "Hi there!",
    "I see what you mean.",
    "Haha that's funny.",
    "No worries.",
]


def test_default_filter_on_held_out_assistant_turns_keeps_every_fact_and_drops_most_filler():
    cfg = EngineConfig()
    lost = [t for t in ASSISTANT_KEEP if not content_filter.judge(t, cfg).keep]
    kept_filler = [t for t in ASSISTANT_DROP if content_filter.judge(t, cfg).keep]
    assert lost == []
    assert len(kept_filler) <= len(ASSISTANT_DROP) // 5, kept_filler
    # A run of acknowledgements is one: "ok, got it." is dropped, "ok so ... Friday" is not.
    assert not content_filter.judge("ok, got it.", cfg).keep
    assert content_filter.judge("ok so the release moved to Friday", cfg).keep


def test_bad_exclude_pattern_is_a_config_error():
    with pytest.raises(ValueError, match="not a valid regex"):
        FilterConfig(exclude_patterns=["(unclosed"])


# -- the engine -------------------------------------------------------------------------------------


async def test_ingest_splits_filters_and_stores_in_order_with_source_and_position(engine):
    res = await engine.ingest(
        {"text": CONVERSATION, "project": "p", "occurred_at": "2023-05-08", "tags": ["chat"]}
    )
    statuses = [p.status for p in res.pieces]
    assert statuses == ["stored", "filtered", "stored", "filtered", "stored", "filtered"]
    assert res.counts == {"pieces": 6, "stored": 3, "duplicate": 0, "filtered": 3}
    assert res.source.startswith("ingest:") and len(res.source) == len("ingest:") + 8
    stored = [await engine.get(p.id) for p in res.pieces if p.status == "stored"]
    assert [m.position for m in stored] == [0, 2, 4]
    assert {m.source for m in stored} == {res.source}
    assert stored[1].content.startswith("Caroline: I went to the LGBTQ support group")
    assert "Elm Street" in stored[2].content  # the continuation line stayed with its turn
    assert all(m.tags == ("chat",) and m.occurred_at.date().isoformat() == "2023-05-08" for m in stored)
    assert all("exclude pattern" in p.reason for p in res.pieces if p.status == "filtered")

    # The same text again: every kept piece is a duplicate of what was stored, nothing new.
    again = await engine.ingest(
        {"text": CONVERSATION, "project": "p", "occurred_at": "2023-05-08", "tags": ["chat"]}
    )
    assert again.counts == {"pieces": 6, "stored": 0, "duplicate": 3, "filtered": 3}
    assert [p.duplicate_of for p in again.pieces if p.status == "duplicate"] == [m.id for m in stored]
    assert (await engine.stats())["memories"] == 3


async def test_ingest_skips_a_near_duplicate_and_reports_what_it_matched(engine):
    first = await engine.remember(
        {"content": "Caroline went to an LGBTQ support group yesterday and found it powerful", "project": "p"}
    )
    res = await engine.ingest(
        {
            "text": "Caroline: I went to an LGBTQ support group yesterday and found it powerful.\n"
            "Caroline: I went to an LGBTQ support group yesterday and found it very powerful!\n"
            "Melanie: My kids and I are going camping at the lake next weekend.",
            "project": "p",
        }
    )
    near, also, other = res.pieces
    assert near.status == "duplicate" and near.duplicate_of == first.id and near.similarity >= 0.85
    assert also.status == "duplicate" and also.duplicate_of == first.id
    assert other.status == "stored"
    # Novelty is per project: the same text elsewhere is new.
    elsewhere = await engine.ingest(
        {
            "text": "Caroline: I went to an LGBTQ support group yesterday and found it powerful.",
            "project": "q",
        }
    )
    assert elsewhere.counts["stored"] == 1


async def test_ingest_deduplicates_within_one_input(engine):
    res = await engine.ingest(
        {
            "text": "Ann: The staging database moved to the eu-west-2 region on Monday.\n"
            "Ben: The staging database was moved to the eu-west-2 region on Monday.\n",
            "project": "p",
        }
    )
    a, b = res.pieces
    assert a.status == "stored" and b.status == "duplicate" and b.duplicate_of == a.id


async def test_documents_are_chunked_in_order_and_linked_to_their_source(engine_config, embedder):
    cfg = engine_config.model_copy(
        update={"chunker": engine_config.chunker.model_copy(update={"max_tokens": 60, "overlap_tokens": 10})}
    )
    eng = Engine(cfg, embedder=embedder)
    await eng.open()
    try:
        res = await eng.ingest(
            {"text": DOCUMENT, "kind": "document", "project": "docs", "source": "retries.md"}
        )
        assert res.counts["pieces"] > 3 and res.counts["filtered"] == 0
        assert [p.position for p in res.pieces] == list(range(len(res.pieces)))
        stored = [await eng.get(p.id) for p in res.pieces if p.id]
        assert all(m.source == "retries.md" and count_tokens(m.content) <= 60 for m in stored)
        assert [m.position for m in stored] == sorted(m.position for m in stored)
    finally:
        await eng.close()


async def test_ingest_refuses_bad_input_and_writes_nothing(engine_config, embedder):
    cfg = engine_config.model_copy(update={"ingest": IngestConfig(max_input_chars=500, max_pieces=3)})
    eng = Engine(cfg, embedder=embedder)
    await eng.open()
    try:
        with pytest.raises(InvalidInput, match="ingest.max_input_chars"):
            await eng.ingest({"text": "Ann: " + "x" * 600})
        with pytest.raises(InvalidInput, match="ingest.max_pieces"):
            await eng.ingest(
                {"text": "\n".join(f"Ann: fact number {i} about the billing service" for i in range(5))}
            )
        with pytest.raises(InvalidInput, match="kind must be one of"):
            await eng.ingest({"text": "Ann: hello there", "kind": "email"})
        with pytest.raises(InvalidInput, match="text is empty"):
            await eng.ingest({"text": "   "})
        with pytest.raises(InvalidInput, match="occurred_at"):
            await eng.ingest({"text": "Ann: The release is on Friday.", "occurred_at": "last tuesday"})
        assert (await eng.stats())["memories"] == 0
    finally:
        await eng.close()


async def test_remember_stores_different_content_and_returns_similar(engine):
    first = await engine.remember({"content": "Alice prefers tabs over spaces in Python projects"})
    out = await engine.remember({"content": "Alice prefers tabs rather than spaces in Python projects"})
    assert out.status == "created" and out.id != first.id
    [(sid, sim)] = out.similar
    assert sid == first.id and 0.85 <= sim <= 1.0
    unrelated = await engine.remember({"content": "The billing service runs on PostgreSQL 16"})
    assert unrelated.similar == ()
    assert (
        await engine.remember({"content": "Alice prefers tabs over spaces in Python projects"})
    ).status == "duplicate"
    assert (await engine.stats())["memories"] == 3


async def test_remember_refuses_a_bare_acknowledgement_naming_the_pattern(engine):
    with pytest.raises(InvalidInput, match="exclude_patterns") as e:
        await engine.remember({"content": "Thanks!"})
    assert "thank" in str(e.value)
    # Only a whole match is refused: a fact that starts with one is stored.
    assert (await engine.remember({"content": "ok so the release moved to Friday"})).status == "created"


# -- over MCP ---------------------------------------------------------------------------------------


async def test_ingest_tool_over_mcp(connect):
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "ingest" in tools and tools["ingest"].output_schema is not None
        r = await client.call_tool("ingest", {"text": CONVERSATION, "project": "chat", "source": "call-1"})
        assert r.is_error is False
        out = r.structured_content
        assert json.loads(r.content[0].text) == out
        assert out["counts"] == {"pieces": 6, "stored": 3, "duplicate": 0, "filtered": 3}
        assert out["source"] == "call-1" and out["project"] == "chat"
        first = out["pieces"][0]
        assert (
            first["status"] == "stored"
            and first["turn"] == 0
            and first["preview"].startswith("Caroline: Hey Mel")
        )
        assert "reason" in out["pieces"][1] and "id" not in out["pieces"][1]
        # What ingest stored is what recall finds.
        res = (
            await client.call_tool(
                "recall", {"query": "when is the pottery class launch?", "project": "chat"}
            )
        ).structured_content
        assert any("March 3" in m["content"] for m in res["memories"])
        # remember reports a near-duplicate it stored anyway.
        rem = (
            await client.call_tool(
                "remember",
                {"content": "We decided to move the pottery class launch to March 3", "project": "chat"},
            )
        ).structured_content
        assert (
            rem["status"] == "created"
            and rem["similar"]
            and rem["similar"][0]["id"] == out["pieces"][4]["id"]
        )
        bad = await client.call_tool("ingest", {"text": "Ann: hi there friend", "kind": "email"})
        assert bad.is_error is True
        bad = await client.call_tool("remember", {"content": "got it"})
        assert bad.is_error is True and "exclude_patterns" in bad.content[0].text


# -- the command line -------------------------------------------------------------------------------


def test_ingest_command_reads_a_file_or_stdin(settings, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", settings.database.url.get_secret_value())
    path = tmp_path / "standup.txt"
    path.write_text(CONVERSATION, encoding="utf-8")
    assert main(["ingest", str(path), "--project", "team", "--tag", "standup"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["source"] == "standup.txt" and out["counts"]["stored"] == 3
    assert out["filtered_by"] == {"exclude_pattern": 3}
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(DOCUMENT))
    assert main(["ingest", "-", "--kind", "document", "--project", "team", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (
        out["kind"] == "document"
        and out["source"].startswith("ingest:")
        and out["pieces"][0]["status"] == "stored"
    )
    assert main(["ingest", str(tmp_path / "missing.txt")]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert main(["remember", "thanks"]) == 1
    assert "exclude_patterns" in capsys.readouterr().err


async def test_semantic_strategy_through_ingest(engine_config, embedder):
    chunker = engine_config.chunker.model_copy(update={"strategy": "semantic", "min_tokens": 5})
    eng = Engine(engine_config.model_copy(update={"chunker": chunker}), embedder=embedder)
    await eng.open()
    try:
        text = (
            "The billing service retries failed card payments three times. Billing sends invoices on the "
            "first of the month.\n\nOur cat Miso loves sleeping on the sofa. Miso eats salmon every evening."
        )
        res = await eng.ingest({"text": text, "kind": "document", "source": "notes.md"})
        assert res.counts["stored"] == 2
        first, second = [await eng.get(p.id) for p in res.pieces]
        assert "billing" in first.content.lower() and "miso" in second.content.lower()
        assert (first.position, second.position) == (0, 1)
    finally:
        await eng.close()
