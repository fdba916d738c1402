"""The checks on an LLM's free-text reply (pipeline/llm/replies.py): refusals and junk are told
apart from replies that only look like them."""

import pytest

from memlane.pipeline.llm.replies import junk, on_topic, repeats
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.hyde import unusable
from memlane.pipeline.recall.synthesize import parse_variants

QUESTION = "Where did Caroline move to and why did she go there?"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("  \n\t ", "empty reply"),
        ("}{ not json", "a JSON or markup fragment"),
        ("<answer>Lisbon</answer>", "a JSON or markup fragment"),
        ("?!?! ... --- !!", "no words"),
        ("12 34 56", "no words"),
        ("a?!?;:--(){}", "mostly punctuation"),
        ("I can't help with that.", "refusal"),
        ("I'm sorry, but I cannot assist with that request.", "refusal"),
        ("Sorry, I can’t do that", "refusal"),
        ("As an AI language model, I do not have memories of you.", "refusal"),
        ("I’m unable to provide personal information.", "refusal"),
        ("I don't have access to your previous conversations.", "refusal"),
        ("I apologize, but that is not something I know.", "refusal"),
    ],
)
def test_refusals_and_junk_are_named(reply, reason):
    why = junk(reply)
    assert why is not None and why.startswith(reason), why


@pytest.mark.parametrize(
    "reply",
    [
        "I can't eat peanuts, Sam told me at lunch.",  # "I can't" with a verb that is not a refusal's
        "I'm sorry I missed the standup on Monday; I was at the dentist.",
        "Release v2.3.1 went out on 2024-06-05.",
        "Caroline moved to Lisbon in May 2023 for a job at a design studio.",
        "- Caroline relocation city",
    ],
)
def test_replies_that_only_look_like_junk_are_kept(reply):
    assert junk(reply) is None


def test_the_question_repeated_and_a_reply_off_its_topic():
    assert repeats("where did Caroline move to, and why did she go there", QUESTION)
    assert not repeats("Where did Caroline move to?", QUESTION)
    assert on_topic(["Bananas grow in the tropics", "Caroline's new city"], QUESTION)
    assert not on_topic(["Bananas grow in the tropics"], QUESTION)
    assert on_topic(["anything at all"], "What was it about?")  # no content word: nothing to check


def test_a_variant_of_synonyms_only_is_kept_beside_one_on_the_topic():
    reply = "1. Caroline relocation city\n2. new home abroad and the reason for it\n3. }{"
    assert parse_variants(reply, QUESTION) == (
        "Caroline relocation city",
        "new home abroad and the reason for it",
    )
    with pytest.raises(LLMError, match="no query variant on the question's topic"):
        parse_variants("new home abroad\nrelocating overseas", QUESTION)
    with pytest.raises(LLMError, match="refusal"):
        parse_variants("I'm sorry, but I can't help with that.\nCaroline", QUESTION)
    assert parse_variants('["Caroline relocation", "new home abroad"]', QUESTION) == (
        "Caroline relocation",
        "new home abroad",
    )


def test_a_hypothetical_memory_must_be_on_the_question_and_not_the_question():
    assert unusable("Caroline moved to Lisbon in May 2023 for a new job.", QUESTION) is None
    assert unusable(QUESTION, QUESTION) == "the reply repeats the question"
    assert unusable("Bananas are rich in potassium.", QUESTION).startswith("the reply shares no word")
    assert unusable("Lisbon.", QUESTION).startswith("reply too short")
