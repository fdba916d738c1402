"""Category names from noun phrases (pipeline/remember/labels.py): what a person would call a
memory or a group of them, never a verb with its object."""

from __future__ import annotations

import pytest

from memlane.pipeline.remember.labels import head_noun, label, phrases
from memlane.pipeline.remember.topics import topic_name


@pytest.mark.parametrize(
    ("text", "name"),
    [
        # The noise: a verb and its object, a subject and its verb.
        ("User ran the Berlin marathon last September in 3 hours 41 minutes.", "berlin marathon"),
        ("Tidepool syncs tide readings from the stations every ten minutes.", "tidepool"),
        ("User's sister Ana lives in Porto with her two kids.", "sister"),
        # A subject that is not the user names the memory; verbs that are nouns after an article.
        ("The sync job retries three times before it gives up.", "sync job"),
        ("Production deploys need a second approval.", "production deploys"),
        ("A failed deploy is rolled back with the rollback workflow.", "failed deploy"),
        ("The integration tests are flaky on CI.", "integration tests"),
        # An instruction starts with its verb; a gerund subject is a noun.
        ("Keep answers short unless the user asks for detail.", "answers"),
        ("Training plan for the spring race: four runs a week.", "training plan"),
        # A name before nouns modifies them; after a noun it is a phrase of its own.
        ("The Japan trip is booked for April.", "japan trip"),
    ],
)
def test_a_memory_is_named_after_its_first_noun_phrase(text, name):
    assert topic_name(text) == name


def test_vague_words_name_nothing_and_phrases_stop_at_verbs_and_possessives():
    assert topic_name("It was good and we had a nice time.") is None
    assert topic_name("See you next week!") is None
    words = [p.words for p in phrases("Sync keeps a cursor per station, and the user's sister calls.")]
    assert words == [("sync",), ("cursor",), ("station",), ("user",), ("sister",)]
    # A speaker's prefix is not a phrase of the memory; a clause before a colon is.
    assert topic_name("Caroline: the pottery class starts on Monday") == "pottery class"
    assert topic_name("Training plan for the spring race: four runs a week.") == "training plan"


def test_a_group_is_named_after_the_word_most_of_its_memories_name():
    texts = [
        "The kitchen renovation starts on 2 June with Silva & Filhos.",
        "For the kitchen we chose oak cabinets and a quartz worktop.",
        "The renovation budget is 18,000 euros.",
        "During the kitchen works the family cooks in the garage.",
    ]
    assert label(texts) == "kitchen"
    # Two memories giving the head the same modifier keep it.
    assert label(
        ["The billing database runs PostgreSQL.", "We moved the billing database to a new disk."]
    ) == ("billing database")
    # Nothing shared: the first memory's phrase.
    assert label(["We adopted a cat.", "The garage door squeaks."]) == "cat"
    assert label(["See you soon.", "Thanks a lot!"]) is None


def test_head_nouns_compare_labels_in_the_singular():
    assert head_noun("Kitchen Renovations") == head_noun("renovation") == "renovation"
    assert head_noun("allergies") == "allergy"
    assert head_noun("glass") == "glass" and head_noun("") == ""
