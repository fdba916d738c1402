"""Providers behind small interfaces: embedders (``embedder.py``: ``make_embedder`` picks one by
``embedding.provider``) and the LLM interface the LLM stages call (``llm.py``)."""
