"""The memory graph: ``entities`` (names in memories and questions) and ``arm`` (the graph
retrieval arm: spreading activation and MPFP over the links the write path stores)."""
