"""Providers behind small interfaces: ``embedding`` (the embedders, picked by
``embedding.provider``) and ``llm`` (the interface the LLM stages call, one module per API)."""
