"""``[database]`` (the PostgreSQL memlane stores in) and ``[backup]`` (its archives)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from memlane.pipeline.config.base import Section


class DatabaseConfig(Section):
    url: SecretStr | None = Field(
        default=None,
        description="External PostgreSQL DSN (needs the pgvector extension). Unset: the embedded server "
        "in data_dir. Set it through MEMLANE_DATABASE__URL so the password stays out of files.",
    )
    pool_min: int = Field(default=1, ge=1, le=64, description="Connections the pool keeps open.")
    pool_max: int = Field(default=8, ge=1, le=256, description="Most connections the pool opens.")
    connect_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for the database.")
    read_urls: list[SecretStr] = Field(
        default_factory=list,
        description="Hot standbys of the external database (streaming replicas of database.url) that "
        "recall reads from, in turn; every write goes to database.url. A replica that is down or behind "
        "is skipped without an error (recall reads the primary). Secret: set it through "
        "MEMLANE_DATABASE__READ_URLS as a JSON list, e.g. '[\"postgresql://user:pass@standby1/db\"]'.",
    )
    replica_wait_ms: float = Field(
        default=200.0,
        ge=0,
        le=10000,
        description="Read-your-writes: how long a recall waits for its replica to replay the caller's last "
        "write (remember, ingest, update, forget, through any server on the database) before reading the "
        "primary instead. 0: check the replica once, without waiting.",
    )

    @model_validator(mode="after")
    def _replicas_of_an_external_primary(self) -> DatabaseConfig:
        if self.read_urls and self.url is None:
            raise ValueError(
                "database.read_urls needs database.url: read replicas are hot standbys of an external "
                "primary, and the embedded server has none"
            )
        return self


class BackupConfig(Section):
    """``memlane backup [FILE]`` and ``memlane restore FILE`` (docs/backup.md). Before upgrading the
    schema of a store that holds memories, memlane backs it up into data_dir/backups and keeps the
    newest ``keep``."""

    keep: int = Field(
        default=5,
        ge=1,
        description="Automatic backups (before a schema upgrade) kept in data_dir/backups; older ones are deleted.",
    )
    before_migrations: bool = Field(
        default=True,
        description="Back up a store that holds memories before upgrading its schema (into data_dir/backups).",
    )
    compression: int = Field(
        default=1,
        ge=0,
        le=9,
        description="pg_dump's gzip level (0: none). 1 wrote a 100k-memory store in a quarter of the time "
        "of pg_dump's default 6, for an archive 13% larger: vectors barely compress.",
    )
    pg_bin_dir: Path | None = Field(
        default=None,
        description="Directory of the pg_dump and pg_restore to use. Unset: the embedded server's "
        "(PostgreSQL 18); a pg_dump refuses a newer server than itself.",
        examples=["/usr/lib/postgresql/19/bin"],
    )
