"""Remember: the write path, from what a caller gives to stored, linked memories.

``write.py`` is the table of contents (parse, secrets, filter, embed, novelty, topics, insert
and links, enrich); every step takes the ``WriteContext`` of ``context.py``. Its steps: ``inputs``
(the one memory model), ``secrets``, ``content_filter``, ``topics``/``topics_llm``, ``facttypes``,
``summaries``, ``extract``; ``ingest`` and ``chunking`` turn a conversation or a document into
memories for it.
"""
