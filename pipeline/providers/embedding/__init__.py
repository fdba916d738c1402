"""Embedders: asymmetric encoding of questions and passages, one per ``embedding.provider``."""
