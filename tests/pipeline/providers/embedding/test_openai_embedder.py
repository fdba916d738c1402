"""The OpenAI embedding option. Paid remote API: the live test runs only with a key."""

import math
import os

import pytest

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding import make_embedder


def test_openai_without_a_key_says_which_variable_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    emb = make_embedder(EmbeddingConfig(provider="openai", model="text-embedding-3-small"))
    assert emb.dim == 1536 and emb.model_id == "openai:text-embedding-3-small"
    with pytest.raises(ConfigError, match="MEMLANE_EMBEDDING__API_KEY or OPENAI_API_KEY"):
        emb.embed("hello")


def test_unknown_openai_model_needs_its_dimensions():
    with pytest.raises(ConfigError, match="dimensions"):
        make_embedder(EmbeddingConfig(provider="openai", model="my-embedder"))


@pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY (live, paid API)")
def test_live_openai_embeddings_are_unit_vectors_of_the_configured_size():
    emb = make_embedder(EmbeddingConfig(provider="openai", model="text-embedding-3-small", dimensions=256))
    vecs = emb.embed_batch(["memlane remembers", "what does memlane do?"])
    assert [len(v) for v in vecs] == [256, 256]
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-3) for v in vecs)
