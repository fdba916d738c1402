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


class ConnectionLost(DatabaseUnavailable):
    """The connection died during a call, which may or may not have committed (one transaction
    either way). ``recovered``: the database is back, so a read can simply run again."""

    def __init__(self, message: str, *, recovered: bool) -> None:
        super().__init__(message)
        self.recovered = recovered


class EmbeddingFailed(MemlaneError):
    """The embedding model raised, or did not answer within ``embedding.embed_timeout_s``. Remember
    stores nothing; recall answers with the arms that need no embedding."""


class ModelMismatch(StoreError):
    """The store holds vectors from another embedding model than the configured one."""


class NotAllowed(MemlaneError, PermissionError):
    """The caller's token does not cover that project. The message names only what the caller
    asked for and what its token covers, never anything about other projects."""


def database_reason(e: BaseException) -> str:
    """The server's or libpq's reason for a database error, without the socket path preamble:
    "Connection refused", "the database system is shutting down", "terminating connection due to
    administrator command"."""
    first = (str(e).strip().splitlines() or [""])[0]
    reason = first.rsplit("failed: ", 1)[-1].replace("FATAL:", "").strip()
    return reason or type(e).__name__
