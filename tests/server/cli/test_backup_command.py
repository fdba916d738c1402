"""``memlane backup`` and ``memlane restore``: a snapshot taken while a writer keeps writing restores
to the same store, exactly; tokens travel with it; a non-empty target and bad input are refused."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import psycopg
import pytest
from support.db import new_database
from support.dump import dump

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.store import backup as backups
from memlane.server.cli import commands
from memlane.server.cli.main import main

QUIET = ("alpha", "beta", "gamma")  # projects no one writes to during the backup
QUERIES = ("Where does Alice work?", "the database migration", "coffee in the morning")


async def _seed(eng: Engine) -> None:
    facts = {
        "alpha": [
            "Alice works at Acme on the billing database.",
            "Alice moved the billing database to PostgreSQL 18 in March.",
            "Bob reviews Alice's database migration scripts.",
            "The Acme office coffee machine is broken again.",
        ],
        "beta": [
            "Carol drinks coffee in the morning before standup.",
            "Carol and Dave run the Berlin office.",
            "Dave plans the database migration of the Berlin servers.",
        ],
        "gamma": ["Erin prefers tea to coffee.", "Erin works with Alice on the Acme website."],
    }
    for project, items in facts.items():
        for i, text in enumerate(items):
            await eng.remember({"content": text, "project": project, "source": f"{project}-notes"})
            if i == 0:
                await eng.remember(
                    {
                        "content": f"Pinned rule of {project}: never deploy on Friday.",
                        "project": project,
                        "pinned": True,
                    }
                )
    expiring = await eng.remember(
        {"content": "The visitor badge code is 4411.", "project": "alpha", "expires_at": "2099-01-01"}
    )
    async with eng.store._connection() as conn:  # expired since yesterday
        await conn.execute(
            "UPDATE memories SET expires_at = now() - interval '1 day' WHERE id = %s", (expiring.id,)
        )


async def _export(eng: Engine, project: str | None, path: Path) -> bytes:
    await commands.cmd_export(eng, argparse.Namespace(project=project, output=str(path)))
    return path.read_bytes()


async def _recall_ids(eng: Engine, query: str) -> list:
    res = await eng.recall(dict(query=query, project=list(QUIET)))
    return [m.id for m, _ in res.memories]


@pytest.mark.anyio
async def test_a_backup_taken_while_writing_restores_that_snapshot_exactly(
    engine, database_url, pg_root, tmp_path
):
    await _seed(engine)
    written: asyncio.Queue[int] = asyncio.Queue()
    stop = asyncio.Event()

    async def writer() -> None:
        n = 0
        while not stop.is_set():
            await engine.remember(
                {"content": f"Busy note {n}: the build {n} passed on runner {n % 3}.", "project": "busy"}
            )
            n += 1
            written.put_nowait(n)

    task = asyncio.create_task(writer())
    try:
        for _ in range(3):
            await written.get()
        path, manifest = await backups.backup(database_url, data_dir=tmp_path)
        for _ in range(3):  # the writer goes on past the snapshot
            await written.get()
    finally:
        stop.set()
        await task
    total = written.qsize() + 6  # (every write was counted in the queue or taken from it)
    assert path.parent == tmp_path / "backups" and backups.NAME_RE.fullmatch(path.name)
    tables = manifest.tables
    assert set(tables) == set(backups.owned_tables())
    for table in ("memories", "memory_links", "memlane_entities", "memory_entities", "memlane_topics"):
        assert tables[table] > 0, table
    with psycopg.connect(database_url) as conn:
        busy_now = conn.execute("SELECT count(*) FROM memories WHERE project = 'busy'").fetchone()[0]
    assert busy_now == total
    assert 3 <= tables["memories"] - 13 < busy_now  # the snapshot has some, not all, busy notes

    target = new_database(pg_root)
    restored_manifest = await backups.restore(target, path)
    assert restored_manifest.tables == tables
    twin = Engine(
        EngineConfig(data_dir=tmp_path / "twin", database=DatabaseConfig(url=target)),
        embedder=engine.embedder,
    )
    await twin.open()
    try:
        # The quiet projects were not written after the snapshot: their exports are the same bytes.
        for project in QUIET:
            assert await _export(twin, project, tmp_path / f"r-{project}") == await _export(
                engine, project, tmp_path / f"o-{project}"
            )
        # The busy project's restored lines are the original's first ones.
        original = (await _export(engine, "busy", tmp_path / "o-busy")).splitlines()
        restored = (await _export(twin, "busy", tmp_path / "r-busy")).splitlines()
        assert len(restored) == tables["memories"] - 13 and set(restored) <= set(original)
        assert restored_manifest.schema_version == twin.store.schema_version
        assert restored_manifest.embedding_model == engine.embedder.model_id
        for query in QUERIES:
            ids = await _recall_ids(twin, query)
            assert ids and ids == await _recall_ids(engine, query), query
    finally:
        await twin.close()


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_the_cli_backs_up_and_restores_tokens_and_refuses_a_non_empty_target(
    database_url, pg_root, tmp_path, own_data_dir, capsys, monkeypatch
):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", database_url)
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path / "source"))
    assert _run(capsys, "token", "create", "--projects", "*", "--name", "ci")[0] == 0
    assert _run(capsys, "remember", "Frank keeps the spare keys.", "--project", "ops")[0] == 0
    code, out, _ = _run(capsys, "backup")
    assert code == 0
    report = json.loads(out)
    path = Path(report["backup"])
    assert path.parent == tmp_path / "source" / "backups" and backups.NAME_RE.fullmatch(path.name)
    assert report["tables"]["memories"] == 1 and report["files"] == ["tokens.json"]
    assert path.stat().st_mode & 0o777 == backups.manifest_path(path).stat().st_mode & 0o777 == 0o600
    assert "password" not in out
    code, _, err = _run(capsys, "backup", str(path))
    assert code == 1 and "exists" in err
    _, out, _ = _run(capsys, "doctor", "--json")
    last = json.loads(out)["last_backup"]
    assert last["path"] == str(path) and last["age"].endswith("seconds")

    # Into an empty external database, with the tokens file of another data directory.
    target = new_database(pg_root)
    monkeypatch.setenv("MEMLANE_DATABASE__URL", target)
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path / "copy"))
    code, out, _ = _run(capsys, "restore", str(path))
    assert code == 0 and json.loads(out)["verified"] is True
    tokens = (tmp_path / "source" / "tokens.json").read_text()
    assert (tmp_path / "copy" / "tokens.json").read_text() == tokens
    before = dump(target)
    code, _, err = _run(capsys, "restore", str(path))
    assert code == 1 and "not empty" in err and "--force" in err
    assert dump(target) == before
    assert _run(capsys, "restore", str(path), "--force")[0] == 0
    assert dump(target) == before

    # Nothing to back up in an empty database; bad input to restore: a missing file, not an archive.
    monkeypatch.setenv("MEMLANE_DATABASE__URL", new_database(pg_root))
    code, _, err = _run(capsys, "backup", str(tmp_path / "empty.dump"))
    assert code == 1 and "no memlane store" in err and not (tmp_path / "empty.dump").exists()
    assert "does not exist" in _run(capsys, "restore", str(tmp_path / "nope.dump"))[2]
    junk = tmp_path / "junk.dump"
    junk.write_text("hello")
    code, _, err = _run(capsys, "restore", str(junk))
    assert code == 1 and "manifest" in err

    # Into an empty embedded data directory; then recall finds the memory there.
    monkeypatch.delenv("MEMLANE_DATABASE__URL")
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(own_data_dir))
    code, out, _ = _run(capsys, "restore", str(path))
    assert code == 0 and json.loads(out)["into"] == f"embedded store in {own_data_dir}"
    code, out, _ = _run(capsys, "recall", "spare keys", "--project", "ops", "--json")
    assert code == 0 and "Frank keeps the spare keys." in out
