"""Embedding (and, later, LLM) providers behind small interfaces, registered by name."""
