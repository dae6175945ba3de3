"""A throwaway PostgreSQL cluster for the tests and benchmarks: ``initdb`` into a
temporary folder, a server on 127.0.0.1 and a free port with password authentication,
run as an unprivileged user (``nobody`` when the tests run as root: PostgreSQL refuses
to run as root). Each test gets a workspace of its own (a schema), dropped after.

``GLYPHPACK_POSTGRES_URL`` (a superuser's URL) points the tests at a server of your
own instead; nothing is started then.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: Enough for the fleet benchmark's 32 processes and their pools; a standby needs the same.
MAX_CONNECTIONS = 200


class Unavailable(Exception):
    """No PostgreSQL server can be started here (the reason says why)."""


def _bindir() -> Path:
    explicit = os.environ.get("GLYPHPACK_PG_BINDIR")
    if explicit:
        return Path(explicit)
    config = shutil.which("pg_config")
    if config:
        found = Path(subprocess.run([config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip())
        if (found / "initdb").is_file():
            return found
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if debian:
        return Path(debian[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise Unavailable("no PostgreSQL server binaries (initdb): install the distribution's postgresql package")


def free_port() -> int:
    """A port on 127.0.0.1 nothing listened on a moment ago (for a server that binds it itself)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """A running server; ``url(database)`` is a superuser's URL for one of its databases."""

    def __init__(self, *, durable: bool = False):
        """``durable``: fsync as a production server does (for benchmarks); the tests
        run without it, as a throwaway server may."""
        bindir = _bindir()
        self.base = Path(tempfile.mkdtemp(prefix="glyphpack-pg-"))
        self.password = secrets.token_hex(12)
        self.port = free_port()
        self.user = "glyphpack"
        run_as = None
        if os.geteuid() == 0:
            run_as = "nobody"
            entry = pwd.getpwnam(run_as)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        self._run_as = run_as
        (self.base / "pw").write_text(self.password)
        if run_as:
            os.chown(self.base / "pw", pwd.getpwnam(run_as).pw_uid, -1)
        data = self.base / "data"
        self._bindir = bindir
        self._standbys: list[Path] = []
        self._pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data)]
        self._call([str(bindir / "initdb"), "-D", str(data), "-U", self.user, "--auth=scram-sha-256",
                    f"--pwfile={self.base / 'pw'}", "-E", "UTF8", "--locale=C", "--no-sync"])
        options = f"-h 127.0.0.1 -p {self.port} -k {self.base} -c max_connections={MAX_CONNECTIONS}"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._call([*self._pg_ctl, "-w", "-t", "60", "-l", str(self.base / "log"), "-o", options, "start"])

    def _call(self, command: list[str], env: dict[str, str] | None = None) -> None:
        try:
            done = subprocess.run(command, capture_output=True, text=True, user=self._run_as, cwd=self.base, timeout=120, env=env)
        except (OSError, subprocess.SubprocessError) as exc:
            raise Unavailable(f"{Path(command[0]).name} failed to run: {exc}") from None
        if done.returncode != 0:
            log = (self.base / "log").read_text(errors="replace")[-2000:] if (self.base / "log").exists() else ""
            raise Unavailable(f"{Path(command[0]).name} failed: {done.stderr.strip()[-2000:]} {log}")

    def url(self, database: str = "postgres", *, password: str | None = None, port: int | None = None) -> str:
        return f"postgresql://{self.user}:{password or self.password}@127.0.0.1:{port or self.port}/{database}"

    def start_standby(self) -> int:
        """A hot standby of this cluster (a read-only replica, streaming from it), on a
        port of its own; returns the port."""
        data = self.base / f"standby{len(self._standbys)}"
        port = free_port()
        env = dict(os.environ, PGPASSWORD=self.password)
        self._call([str(self._bindir / "pg_basebackup"), "-D", str(data), "-R", "-X", "stream", "-c", "fast",
                    "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user], env=env)
        self._standbys.append(data)
        self._call([str(self._bindir / "pg_ctl"), "-D", str(data), "-w", "-t", "60", "-l", str(data) + ".log",
                    "-o", f"-h 127.0.0.1 -p {port} -k {self.base} -c max_connections={MAX_CONNECTIONS}", "start"])
        return port

    def stop(self) -> None:
        try:
            for standby in self._standbys:
                self._call([str(self._bindir / "pg_ctl"), "-D", str(standby), "-m", "immediate", "stop"])
            self._call([*self._pg_ctl, "-m", "immediate", "stop"])
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


class Server:
    """Databases on a cluster this process started, or on the one ``GLYPHPACK_POSTGRES_URL`` names."""

    def __init__(self, *, durable: bool = False):
        import psycopg

        self._psycopg = psycopg
        given = os.environ.get("GLYPHPACK_POSTGRES_URL")
        self.cluster = None if given else Cluster(durable=durable)
        self.admin_url = given or self.cluster.url()  # type: ignore[union-attr]
        self._count = 0
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5).close()
                break
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise Unavailable(f"the server does not answer: {exc}") from None
                time.sleep(0.2)

    def create(self) -> str:
        """A new, empty workspace: a schema of its own (a database is ~40x slower to
        make), named by the URL's search_path; returns a superuser's URL for it."""
        self._count += 1
        name = f"ws_{os.getpid()}_{self._count}"
        with self._psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.admin_url}?options=-csearch_path%3D{name}"

    def drop(self, url: str) -> None:
        name = url.rsplit("%3D", 1)[-1]
        with self._psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
