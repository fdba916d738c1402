"""Supersession: a newer memory marks an older one ``superseded_by`` it (nothing is deleted), two
that contradict each other are marked ``conflicts_with`` each other, and recall puts what is
current first (docs/supersession.md).

| module | what it does |
|---|---|
| detect.py | the rules: whether a new statement replaces, contradicts or leaves a stored one |
| judge.py | the ``supersede`` LLM stage, deciding instead of the rules when enabled |
| marks.py | the marks made on the write path (step 8) and restored by import |
| order.py | recall's ordering (stage 8): own facts, newer statements, successors, ``as_of`` |
| undo.py | a user's decisions: supersede by hand, unsupersede |
| history.py | a memory's past: its versions, what it superseded, what supersedes it |

The marks' SQL is the store's (``pipeline/store/supersession.py``, migration 0013), below every
layer that reads it; the remember path, recall and the engine reach supersession through here.
"""
