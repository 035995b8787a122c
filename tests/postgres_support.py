"""A throw-away PostgreSQL cluster for the deployment tests, and the servers on top of it.

:func:`start_postgres` runs ``initdb`` and then ``postgres -D`` as a :class:`Managed` process
(own process group, log under the test's tmp dir) listening on 127.0.0.1 only, on a free port,
with no Unix socket; ``pg_hba.conf`` admits TCP connections from 127.0.0.1 with a password
(SCRAM-SHA-256) and nothing else. It creates one login role with a random password and the two
databases ``prefect`` and ``mlflow`` owned by it.

Binaries: ``initdb`` on ``PATH`` (its directory must also hold ``postgres``), else the newest
``/usr/lib/postgresql/<major>/bin`` (where Debian's ``postgresql`` package installs them;
``.ci/run`` installs that package). ``initdb`` and ``postgres`` refuse to run as root: under
uid 0 both run as the ``postgres`` system user (Debian's package creates it). Its data
directory cannot then live under pytest's tmp dir: pytest creates that 0700, and every pytest
session that starts (another engineer's, CI's) tightens ``/tmp/pytest-of-<user>`` back to 0700,
which once cut a running cluster off its own ``pg_hba.conf``. Under root the cluster therefore
lives in a fresh 0700 directory of the system temp dir owned by ``postgres``, linked from
``<tmp>/postgres`` and removed when the cluster stops; its log stays under ``<tmp>/logs``.
Where none of that is possible the test fails with the reason: a database test that cannot
start its database must not pass as skipped.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from deployments_support import BIN, Managed, clean_env, free_port, wait_until

PG_ROOTS = Path("/usr/lib/postgresql")
SYSTEM_USER = "postgres"
ADMIN = "fe_admin"  # the cluster's superuser (initdb --username)
ROLE = "fairengine"  # the servers' login role, owner of both databases
DATABASES = ("prefect", "mlflow")


def postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``: PATH first, then Debian's layout."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []

    def major(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)

    candidates += sorted(PG_ROOTS.glob("*/bin"), key=major, reverse=True)
    for d in candidates:
        if (d / "initdb").is_file() and (d / "postgres").is_file():
            return d
    return None


@dataclass
class PostgresCluster:
    """A running cluster: where it listens and who may log in."""

    bindir: Path
    root: Path
    port: int
    admin_password: str
    password: str
    managed: Managed | None = None
    version: str = ""
    owns_root: bool = False  # root is a directory of the system temp dir, removed at stop

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str, driver: str = "postgresql") -> str:
        """SQLAlchemy URL of ``database`` for the servers' role (password included)."""
        return f"{driver}://{ROLE}:{quote(self.password, safe='')}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres", *, admin: bool = False) -> Any:
        import psycopg2

        return psycopg2.connect(
            host="127.0.0.1",
            port=self.port,
            dbname=database,
            user=ADMIN if admin else ROLE,
            password=self.admin_password if admin else self.password,
            connect_timeout=5,
        )

    def query(self, database: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple]:
        """Rows of one read-only query in ``database`` (as the servers' role)."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())
        finally:
            conn.close()

    def stop(self) -> list[int]:
        """Fast shutdown (SIGINT to the postmaster: sessions are ended, a checkpoint written),
        then :meth:`Managed.stop` for anything left; returns surviving pids."""
        survivors: list[int] = []
        if self.managed is not None:
            proc = self.managed.proc
            self.managed.remember_tree()
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGINT)
                    proc.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            survivors = self.managed.stop()
        if self.owns_root and not survivors:
            shutil.rmtree(self.root, ignore_errors=True)
        return survivors


def _run_as_postgres() -> dict[str, Any]:
    """``Popen`` arguments that drop root to the ``postgres`` system user ({} if not root)."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        pytest.fail(
            "running as root, and initdb/postgres refuse to run as root, but there is no "
            f"'{SYSTEM_USER}' system user to run them as (Debian's postgresql package creates "
            "it: apt-get install postgresql; or run the tests as an ordinary user)"
        )
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _cluster_root(tmp: Path, as_user: dict[str, Any]) -> tuple[Path, bool]:
    """The cluster's directory, writable by whoever runs initdb/postgres; ``True`` if it is a
    system temp directory to remove at the end (root: see the module's docstring)."""
    if not as_user:
        root = tmp / "postgres"
        root.mkdir(mode=0o700)
        return root, False
    root = Path(tempfile.mkdtemp(prefix="fairengine-pg-"))
    os.chown(root, as_user["user"], as_user["group"])
    (tmp / "postgres").symlink_to(root, target_is_directory=True)
    probe = subprocess.run(["test", "-w", str(root)], **as_user, capture_output=True, timeout=10)
    if probe.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(
            f"the '{SYSTEM_USER}' system user cannot write {root}, a directory it owns in the "
            f"system temp dir ({tempfile.gettempdir()}: not traversable for it?); initdb and "
            "postgres refuse to run as root, so the PostgreSQL tests cannot run here"
        )
    return root, True


def start_postgres(tmp: Path, logs: Path, timeout: float = 60.0) -> PostgresCluster:
    """initdb + ``postgres -D`` under ``tmp/postgres``, the role and both databases created."""
    bindir = postgres_bindir()
    if bindir is None:
        pytest.fail(
            "PostgreSQL server binaries not found (initdb on PATH or in "
            f"{PG_ROOTS}/*/bin): install Debian's postgresql package (.ci/run does)"
        )
    as_user = _run_as_postgres()
    root, owns_root = _cluster_root(tmp, as_user)
    cluster = PostgresCluster(
        bindir=bindir,
        root=root,
        port=free_port(),
        admin_password=secrets.token_urlsafe(18),
        password=secrets.token_urlsafe(18),
        owns_root=owns_root,
    )
    pwfile = cluster.root / "admin-password"
    pwfile.write_text(cluster.admin_password + "\n")
    pwfile.chmod(0o600)
    if as_user:
        os.chown(pwfile, as_user["user"], as_user["group"])
    logs.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
    init = subprocess.run(
        [
            str(bindir / "initdb"),
            "--pgdata",
            str(cluster.data),
            "--username",
            ADMIN,
            "--pwfile",
            str(pwfile),
            "--auth",
            "scram-sha-256",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
        ],
        env=env,
        cwd=cluster.root,
        capture_output=True,
        timeout=120,
        **as_user,
    )
    (logs / "initdb.log").write_bytes(init.stdout + init.stderr)
    pwfile.unlink()
    if init.returncode != 0:
        cluster.stop()
        pytest.fail(f"initdb failed ({init.returncode}):\n{(init.stdout + init.stderr).decode()}")
    # TCP from 127.0.0.1 with a password, nothing else (no Unix socket, no ::1, no replication)
    (cluster.data / "pg_hba.conf").write_text(
        "# TYPE  DATABASE  USER  ADDRESS       METHOD\n"
        "host    all       all   127.0.0.1/32  scram-sha-256\n"
    )
    log = logs / "postgres.log"
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [
                str(bindir / "postgres"),
                "-D",
                str(cluster.data),
                "-p",
                str(cluster.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                # a throw-away cluster: durability is not wanted, speed is
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ],
            env=env,
            cwd=cluster.root,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **as_user,
        )
    cluster.managed = Managed("postgres", proc, log)
    try:
        _create_role_and_databases(cluster, timeout)
    except BaseException:
        cluster.stop()  # a half-started cluster is not left behind
        raise
    return cluster


def _create_role_and_databases(cluster: PostgresCluster, timeout: float) -> None:
    """Wait for the postmaster, then create the servers' role and its two databases."""
    assert cluster.managed is not None

    def admin_ready() -> Any:
        conn = cluster.connect(admin=True)
        try:
            return conn.server_version
        finally:
            conn.close()

    version = wait_until(admin_ready, timeout, "postgres to accept connections", (cluster.managed,))
    cluster.version = f"{version // 10000}.{version % 10000}"
    from psycopg2 import sql

    conn = cluster.connect(admin=True)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(ROLE), sql.Literal(cluster.password)
                )
            )
            for db in DATABASES:
                cur.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(
                        sql.Identifier(db), sql.Identifier(ROLE)
                    )
                )
    finally:
        conn.close()


# ------------------------------------------------------------------ servers on PostgreSQL
def start_prefect_server_pg(
    tmp: Path, logs: Path, cluster: PostgresCluster
) -> tuple[Managed, str, Path]:
    """``prefect server start`` on the ``prefect`` database (asyncpg); its own PREFECT_HOME."""
    from deployments_support import start

    port = free_port()
    home = tmp / "prefect-server"
    env = clean_env(
        PREFECT_HOME=str(home),
        PREFECT_API_DATABASE_CONNECTION_URL=cluster.url("prefect", "postgresql+asyncpg"),
        PREFECT_UI_ENABLED="false",
        PREFECT_SERVER_LOGGING_LEVEL="WARNING",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    proc = start(
        "prefect-server",
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env,
        tmp,
        logs,
    )
    return proc, f"http://127.0.0.1:{port}/api", home


def start_mlflow_server_pg(
    tmp: Path, logs: Path, cluster: PostgresCluster, webhook_key: str
) -> tuple[Managed, str]:
    """``mlflow server`` on the ``mlflow`` database (psycopg2), artifacts under ``tmp``.

    The store URI travels in ``MLFLOW_BACKEND_STORE_URI`` (the option's environment variable),
    so that the password is not on a command line."""
    from deployments_support import start

    port = free_port()
    artifacts = tmp / "mlflow-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    env = clean_env(
        MLFLOW_BACKEND_STORE_URI=cluster.url("mlflow"),
        MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY=webhook_key,
        MLFLOW_WEBHOOK_ALLOWED_SCHEMES="http,https",
        MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS="true",
        MLFLOW_WEBHOOK_CACHE_TTL="1",
    )
    proc = start(
        "mlflow-server",
        [
            str(BIN / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--artifacts-destination",
            str(artifacts),
            "--workers",
            "1",
        ],
        env,
        tmp,
        logs,
    )
    return proc, f"http://127.0.0.1:{port}"
