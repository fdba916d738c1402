"""What every settings section shares: ``Section`` (unknown keys are errors), and where the data
directory is."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


def default_data_dir() -> Path:
    """The platform's user data directory for memlane (``~/.local/share/memlane`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("memlane", appauthor=False))


def data_dir_of(data_dir: Path | None) -> Path:
    """Where the embedded database, the backups and the tokens file live: ``data_dir`` as set,
    else the default."""
    return Path(data_dir or default_data_dir()).expanduser()


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)
