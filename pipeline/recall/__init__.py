"""Recall: the nine stages that turn a question into the memories worth reading.

``run.py`` is the table of contents (every stage, top to bottom); one module per stage:
``intent`` (1), ``synthesize`` (2), ``hyde`` (3), ``retrieve`` with the arm registry ``arms`` (4),
``fuse`` (5), ``rerank`` (6), ``threshold`` (7), ``adjust`` (8), ``assemble`` (9). ``context``
is what every stage receives, ``stage`` the stage contract and its trace, ``render`` what the
client's model reads.
"""
