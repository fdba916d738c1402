"""memlane's engine: the remember and recall paths, the store and the providers.

Nothing here imports ``mcp``: the CLI, the benchmark and the tests drive this package directly.
"""
