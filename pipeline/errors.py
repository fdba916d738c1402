"""One error family for the engine. ``server/`` turns these into tool errors an agent can act on.

Named ``MemlaneError`` so it never shadows the builtin ``MemoryError``.
"""


class MemlaneError(Exception):
    """Base of every error memlane raises on purpose."""


class InvalidInput(MemlaneError, ValueError):
    """The caller sent something memlane cannot accept; the message says what is accepted."""


class NotFound(MemlaneError, LookupError):
    """No memory has that id (in that project)."""


class ConfigError(MemlaneError):
    """The configuration is invalid; the message names the key."""


class StoreError(MemlaneError):
    """The database could not be reached or is in a state memlane cannot use."""


class DatabaseUnavailable(StoreError):
    """The database is down, restarting or unreachable; the message says whether to retry now."""


class ModelMismatch(StoreError):
    """The store holds vectors from another embedding model than the configured one."""
