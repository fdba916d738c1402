"""The memory graph's retrieval arm, ``arm``: spreading activation and MPFP over the entity and
memory links the write path stores. The entities themselves (``pipeline/entities.py``) sit below
the store, which resolves them when it writes links."""
