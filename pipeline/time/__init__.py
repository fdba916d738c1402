"""Time: ``parser`` (the one time-expression grammar, "last week" to dated ranges) and ``arm``
(the temporal retrieval arm that reads those ranges)."""
