"""flows/prefect_database.py: a fresh Prefect SQLite database written from the shipped schema is
the database the installed Prefect's migrations make (same tables, indexes, SQL and Alembic
revision, no other rows); it is written only into a missing SQLite file, for the schema's
Prefect version, atomically; the embedded server starts on it and records flow runs in it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from importlib.metadata import version
from pathlib import Path

import pytest

from flows.prefect_database import (
    SCHEMA_FILE,
    database_path,
    dump_migrated_schema,
    schema_version,
    seed_database,
    write_database,
)

REPO = Path(__file__).resolve().parents[1]


def normalized(sql: str | None) -> tuple[str, ...]:
    """A statement's lines without trailing commas, sorted: Alembic's batch migrations write a
    re-created table's constraints in an order that varies from run to run (it iterates a set),
    so two migrations of the same Prefect differ only in that order."""
    if sql is None:
        return ()
    return tuple(sorted(line.strip().rstrip(",").strip() for line in sql.splitlines()))


def schema_of(path: Path) -> dict[str, object]:
    """What a Prefect database consists of: every schema object's SQL, the Alembic revision,
    the row count of every table and the pragmas a migration could set."""
    connection = sqlite3.connect(path)
    try:
        objects = sorted(
            (kind, name, table, normalized(sql))
            for kind, name, table, sql in connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        )
        tables = [name for kind, name, _, _ in objects if kind == "table"]
        counts = {
            t: connection.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables
        }
        revision = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        pragmas = {
            p: connection.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("user_version", "application_id", "auto_vacuum", "journal_mode")
        }
    finally:
        connection.close()
    return {"objects": objects, "counts": counts, "revision": revision, "pragmas": pragmas}


def test_the_shipped_schema_is_what_the_installed_prefects_migrations_make(
    tmp_path: Path,
) -> None:
    """A database migrated by the installed Prefect (all its Alembic migrations, in a fresh
    PREFECT_HOME) and one written from flows/prefect_sqlite_schema.sql are the same database.
    Fails after a Prefect upgrade until `python -m flows.prefect_database` rewrote the file."""
    shipped = SCHEMA_FILE.read_text(encoding="utf-8")
    assert schema_version(shipped) == version("prefect"), (
        "flows/prefect_sqlite_schema.sql was written for another Prefect; run "
        "`python -m flows.prefect_database`"
    )
    migrated_dump = dump_migrated_schema(tmp_path / "home")
    migrated = schema_of(tmp_path / "home" / "prefect.db")
    write_database(tmp_path / "seeded.db", shipped)
    seeded = schema_of(tmp_path / "seeded.db")
    assert seeded == migrated
    assert len(migrated["objects"]) > 100  # tables and indexes, not an empty file
    assert migrated["revision"] and set(migrated["counts"].values()) == {0, 1}
    assert migrated["pragmas"]["journal_mode"] == "wal"
    # the first line names the version and revision the file was written from
    assert migrated_dump.split("\n", 1)[0] == shipped.split("\n", 1)[0]


def test_only_a_missing_sqlite_file_of_the_schemas_prefect_version_is_written(
    tmp_path: Path,
) -> None:
    target = tmp_path / "home" / "prefect.db"
    assert seed_database(target) is True
    assert schema_of(target)["revision"] == schema_of_shipped(tmp_path)["revision"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["prefect.db"]  # no temp files
    before = target.read_bytes()
    assert seed_database(target) is False  # an existing database is never touched
    assert target.read_bytes() == before

    other = tmp_path / "other.db"
    other.write_bytes(b"not a database")
    assert seed_database(other) is False
    assert other.read_bytes() == b"not a database"

    old = tmp_path / "old.sql"
    old.write_text("-- prefect 0.0.1; alembic x\nCREATE TABLE t (x);\n", encoding="utf-8")
    assert seed_database(tmp_path / "v.db", schema_file=old) is False
    assert not (tmp_path / "v.db").exists()  # another Prefect version: left to its migrations

    unwritable = tmp_path / "file-not-folder"
    unwritable.write_text("x")
    assert seed_database(unwritable / "prefect.db") is False  # no error: Prefect migrates


def schema_of_shipped(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "shipped-reference.db"
    if not path.exists():
        write_database(path, SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema_of(path)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite+aiosqlite:////home/u/.prefect/prefect.db", Path("/home/u/.prefect/prefect.db")),
        ("sqlite+aiosqlite:///relative.db", Path("relative.db")),
        ("postgresql+asyncpg://u:p@localhost/prefect", None),
        ("sqlite+aiosqlite:///file::memory:?cache=shared&uri=true", None),
        ("sqlite+aiosqlite:///:memory:", None),
        ("sqlite+aiosqlite:///db.sqlite?timeout=5", None),
        (None, None),
    ],
)
def test_which_connection_urls_are_seeded(url: str | None, expected: Path | None) -> None:
    assert database_path(url) == expected


def test_two_audits_starting_in_one_fresh_home_write_it_once(tmp_path: Path) -> None:
    target = tmp_path / "prefect.db"
    outcomes: list[bool] = []
    barrier = threading.Barrier(4)

    def seed() -> None:
        barrier.wait()
        outcomes.append(seed_database(target))

    threads = [threading.Thread(target=seed) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False, False, False, True]
    assert schema_of(target) == schema_of_shipped(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prefect.db", "shipped-reference.db"]


@pytest.mark.flow
def test_the_embedded_server_starts_on_a_seeded_database_and_records_flow_runs_in_it(
    tmp_path: Path,
) -> None:
    """A fresh PREFECT_HOME: start_embedded_server writes the database from the schema, the
    server starts on it (its migrations find nothing to do) and a flow run lands in it."""
    home = tmp_path / "prefect-home"
    script = textwrap.dedent(
        """
        import json, sqlite3, sys
        from pathlib import Path
        from flows import startup

        seeded = []
        seed = startup.seed_database
        startup.seed_database = lambda *a, **k: seeded.append(seed(*a, **k)) or seeded[-1]
        start = startup.start_embedded_server()
        start.join()
        from prefect import flow

        @flow(name="seeded-db-check")
        def check() -> int:
            return 7

        value = check()
        db = Path(sys.argv[1]) / "prefect.db"
        names = [r[0] for r in sqlite3.connect(db).execute(
            "SELECT f.name FROM flow_run r JOIN flow f ON f.id = r.flow_id")]
        print(json.dumps({"seeded": seeded, "value": value, "flows": names}))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL",)}
    env.update(PREFECT_HOME=str(home), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", script, str(home)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"seeded": [True], "value": 7, "flows": ["seeded-db-check"]}
