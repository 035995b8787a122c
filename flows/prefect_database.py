"""A fresh Prefect SQLite database written from the schema of the installed Prefect version.

Prefect's server creates its SQLite database by running its Alembic migrations one after the
other (114 of them for Prefect 3.8.8, each a batch of ``ALTER``/copy-table statements): 7.5 s
of one core on this project's 2-core machine, on the critical path of every audit that starts
with a fresh ``PREFECT_HOME`` (a user's first audit, every CI run, every test with a temporary
home), while the audit waits for the server to answer. The schema those migrations end with is
fixed for a Prefect version. ``flows/prefect_sqlite_schema.sql`` is that schema, ``sqlite3``'s
dump of a database the installed Prefect migrated (tables, indexes and the Alembic revision,
no other rows), for the Prefect version named on its first line.

:func:`seed_database` writes it into the server's database file before the server starts
(:func:`flows.startup.start_embedded_server`, :func:`flows.prefect_server.start_server`) when
all of these hold, and otherwise does nothing, leaving the database to Prefect's migrations as
before:

* the installed Prefect is the version the file was written for;
* the server's database is a SQLite file (``sqlite+aiosqlite:///<path>``, Prefect's default
  ``<PREFECT_HOME>/prefect.db``; not PostgreSQL, not in memory);
* that file does not exist yet.

The server then finds its database at the newest revision, and Alembic's ``upgrade head`` on
start does nothing (0.6 s). The file is written under a temporary name and hard-linked into
place, so two audits starting in the same fresh home never see a half-written database, and an
existing database is never touched. Any failure of the seeding (a read-only folder, a file
system without hard links) is logged and leaves the database to Prefect.

After a Prefect upgrade, write the file again with ``python -m flows.prefect_database``;
``tests/test_prefect_database.py`` compares it with a database migrated by the installed
Prefect, so a stale file fails the tests rather than the audits (which skip it anyway, by the
version check).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

log = logging.getLogger(__name__)

SCHEMA_FILE = Path(__file__).with_name("prefect_sqlite_schema.sql")
"""The dump of a freshly migrated Prefect database; first line ``-- prefect <version> ...``."""
SQLITE_PREFIX = "sqlite+aiosqlite:///"
"""The form of the connection URLs this module seeds (a file path follows)."""


def schema_version(schema: str) -> str | None:
    """The Prefect version a schema dump was written for: its first line,
    ``-- prefect <version>; alembic <revision>``; ``None`` when the line is not there."""
    first = schema.split("\n", 1)[0].split()
    if len(first) >= 3 and first[:2] == ["--", "prefect"]:
        return first[2].rstrip(";")
    return None


def database_path(connection_url: str | None) -> Path | None:
    """The file of a ``sqlite+aiosqlite:///<path>`` URL; ``None`` for any other database
    (PostgreSQL, in-memory or ``file:`` URIs with options)."""
    if not connection_url or not connection_url.startswith(SQLITE_PREFIX):
        return None
    path = connection_url[len(SQLITE_PREFIX) :]
    if not path or "?" in path or path.startswith("file:") or ":memory:" in path:
        return None
    return Path(path)


def server_database_path(*, fresh_settings: bool = False) -> Path | None:
    """The SQLite file a Prefect server started now would use: the current settings'
    ``server.database.connection_url`` (Prefect's default ``<PREFECT_HOME>/prefect.db``).
    ``fresh_settings``: read the settings anew from the environment and profile (for a server
    process that inherits this process's environment, not its settings context)."""
    from prefect.settings import Settings, get_current_settings

    settings = Settings() if fresh_settings else get_current_settings()
    url = settings.server.database.connection_url
    return database_path(url.get_secret_value() if url is not None else None)


def write_database(path: Path, schema: str) -> None:
    """Create the SQLite database ``path`` (new, or an empty file) from ``schema``, in WAL
    journal mode as Prefect's server sets it."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(schema)
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def seed_database(
    path: Path | None = None, *, fresh_settings: bool = False, schema_file: Path = SCHEMA_FILE
) -> bool:
    """Write the shipped schema into Prefect's database file ``path`` (default
    :func:`server_database_path`, with ``fresh_settings``) when the file does not exist and
    the installed Prefect is the schema's version; ``True`` when this call wrote it. Never
    raises: a database it cannot write is left to Prefect's migrations."""
    try:
        if path is None:
            path = server_database_path(fresh_settings=fresh_settings)
        if path is None or path.exists():
            return False
        schema = schema_file.read_text(encoding="utf-8")
        if schema_version(schema) != version("prefect"):
            log.debug("Prefect %s: no shipped schema; it migrates its database", version("prefect"))
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".prefect-db-seed-")
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            write_database(tmp, schema)  # sqlite3 takes the empty file as a new database
            try:
                os.link(tmp, path)  # atomic, and never over an existing database
            except FileExistsError:
                return False
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)
        return True
    except Exception as exc:  # the server's own migrations still work
        log.debug("Prefect database not seeded (%s); Prefect migrates it", exc)
        return False


def dump_migrated_schema(home: Path) -> str:
    """Migrate a new Prefect database in ``home`` with the installed Prefect's migrations (in
    a subprocess, whose settings point there) and return its ``sqlite3`` dump, headed by the
    Prefect version and the Alembic revision."""
    env = {**os.environ, "PREFECT_HOME": str(home)}
    for key in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        env.pop(key, None)
    code = (
        "import asyncio\n"
        "from prefect.server.database import provide_database_interface\n"
        "asyncio.run(provide_database_interface().create_db())\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    connection = sqlite3.connect(home / "prefect.db")
    try:
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        body = "\n".join(connection.iterdump())
    finally:
        connection.close()
    return (
        f"-- prefect {version('prefect')}; alembic {revision}; "
        "written by `python -m flows.prefect_database` from the migrated database\n" + body + "\n"
    )


def main() -> None:
    """Write :data:`SCHEMA_FILE` for the installed Prefect."""
    with tempfile.TemporaryDirectory() as home:
        SCHEMA_FILE.write_text(dump_migrated_schema(Path(home)), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE} for Prefect {version('prefect')}")


if __name__ == "__main__":
    main()
