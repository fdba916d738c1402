"""Who may read and write which projects: the patterns, the refusal's words, and the engine's
per-principal checks on a real database (tests/server/auth/ has the tokens and the HTTP side)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from memlane.pipeline.access import LOCAL, Principal, allowed, check, readable_projects
from memlane.pipeline.errors import InvalidInput, NotAllowed, NotFound

ACME = Principal("acme-bot", ("acme*",))


def test_patterns_allow_matching_projects_only_and_star_only_to_an_all_projects_principal():
    assert allowed(ACME, "acme") and allowed(ACME, "acme-web")
    assert not allowed(ACME, "globex") and not allowed(ACME, "Acme")  # case-sensitive
    assert not allowed(ACME, "*")  # "every project" is not a project acme* covers
    assert allowed(Principal("a", ("*",)), "*") and allowed(Principal("a", ("*",)), "globex")
    assert allowed(None, "anything") and allowed(LOCAL, "*")
    assert not allowed(Principal("nothing", ()), "acme")  # no patterns: nothing
    assert readable_projects(ACME, ["globex", "acme-web", "acme", "default"]) == ["acme", "acme-web"]
    assert readable_projects(None, ["b", "a"]) == ["a", "b"]


def test_refusal_text_is_the_same_for_an_existing_and_a_missing_project():
    def msg(project: str) -> str:
        with pytest.raises(NotAllowed) as e:
            check(ACME, project)
        return str(e.value).replace(repr(project), "P")

    assert msg("globex") == msg("no-such-project")
    assert "acme*" in msg("globex") and "memlane token create" in msg("globex")


@pytest.mark.anyio
async def test_engine_enforces_the_principal_on_every_call(engine, database_url):
    mine = await engine.remember({"content": "Acme deploys on Fridays", "project": "acme"})
    theirs = await engine.remember({"content": "Globex deploys on Mondays", "project": "globex"})
    with pytest.raises(NotAllowed):
        await engine.remember({"content": "x", "project": "globex"}, principal=ACME)
    with pytest.raises(NotAllowed):
        await engine.remember({"content": "x"}, principal=ACME)  # the default project is not acme*
    with pytest.raises(NotAllowed):
        await engine.recall(dict(query="deploys", project="globex"), principal=ACME)
    res = await engine.recall(dict(query="deploys", project="acme"), principal=ACME)
    assert [m.id for m, _ in res.memories] == [mine.id]

    # By id: a memory of another project is a missing id, in the same words.
    def same(e1: Exception, e2: Exception, a: str, b: str) -> None:
        assert type(e1) is type(e2) is NotFound
        assert str(e1).replace(a, "ID") == str(e2).replace(b, "ID")

    missing = uuid.uuid4()
    for call in (engine.forget, engine.get):
        with pytest.raises(NotFound) as foreign:
            await call(str(theirs.id), principal=ACME)
        with pytest.raises(NotFound) as absent:
            await call(str(missing), principal=ACME)
        same(foreign.value, absent.value, str(theirs.id), str(missing))
        with pytest.raises(NotFound) as foreign:
            await call(str(theirs.id)[:8], principal=ACME)
        with pytest.raises(NotFound) as absent:
            await call(missing.hex[:8], principal=ACME)
        same(foreign.value, absent.value, str(theirs.id)[:8], missing.hex[:8])
    with pytest.raises(NotFound):
        await engine.update(str(theirs.id), {"content": "hijacked"}, principal=ACME)
    assert (await engine.get(theirs.id)).content == "Globex deploys on Mondays"  # untouched

    stats = await engine.stats(principal=ACME)
    assert stats["projects"] == {"acme": 1} and stats["memories"] == 1
    assert (await engine.stats())["projects"] == {"acme": 1, "globex": 1}

    # Two ids sharing their first 8 hex digits, one per project: the local user's prefix is
    # ambiguous (both listed); acme's resolves to its own and never lists globex's.
    a_id, g_id = (
        uuid.UUID("abcd1234-0000-4000-8000-00000000000a"),
        uuid.UUID("abcd1234-0000-4000-8000-00000000000b"),
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_access")  # the recall above counted an access
        conn.execute("UPDATE memories SET id = %s WHERE id = %s", (a_id, mine.id))
        conn.execute("UPDATE memories SET id = %s WHERE id = %s", (g_id, theirs.id))
    with pytest.raises(InvalidInput, match="ambiguous") as e:
        await engine.get("abcd1234")
    assert "globex" in str(e.value)
    assert (await engine.get("abcd1234", principal=ACME)).id == a_id
    gone = await engine.forget("abcd1234", principal=ACME)
    assert gone.id == a_id and (await engine.get(g_id)).project == "globex"
