"""An embedded PostgreSQL server under the data root, for runs without DEDUP_DB_URL or Airflow.

A real server (the machine's PostgreSQL binaries, or those of the `pgserver` wheel when the machine
has none), initialised once in `<root>/registry/pg` and started on a private unix-socket directory:
no TCP port is opened, so two data roots never collide and nothing is reachable from the network.

PostgreSQL refuses to run as root. When this process is root, the server runs as an unprivileged
user: the owner of an existing data directory, else $DEDUP_PG_OS_USER, else `postgres` when it exists,
else a system user `dedup-pg` created with useradd, else `nobody`.

That user must be able to enter every folder above the data directory. Root's clone often sits in a
folder of mode 700 (`/root` on most images), which it cannot: then a new cluster is placed in
SERVER_PLACE/<name>-<hash of the data directory's path>/pg, a folder owned by that user, and
`<root>/registry/pg` becomes a symbolic link to it, so every later run of the same data root finds it
again. The run logs where it went. Where the user can reach the data root, the cluster stays in it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_SETTINGS: dict[str, str] = {
    # Modest defaults for a laptop / CI box; a dedicated registry server should get more.
    "shared_buffers": "256MB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
    "maintenance_work_mem": "512MB",
    "listen_addresses": "",
}


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be initialised or started."""


# Where a cluster goes when the server's user cannot reach the data root (module docstring): a folder
# every user may traverse on Linux images, owned by root.
SERVER_PLACE = Path("/var/lib/crawl-dedup")


def server_place(data_dir: Path) -> Path:
    """The data directory a cluster of ``data_dir`` gets under SERVER_PLACE: named after the folders
    above ``<root>/registry/pg`` and a hash of its absolute path, so two data roots never share one."""
    path = Path(data_dir).absolute()
    label = "-".join(part for part in path.parts[-4:-2] if part not in ("/", "")) or "root"
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:60]
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    return SERVER_PLACE / f"{label}-{digest}" / "pg"


@dataclass(frozen=True)
class _RunAs:
    name: str
    uid: int
    gid: int

    def subprocess_kwargs(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def find_bin_dir() -> Path:
    """The directory holding initdb, pg_ctl and postgres."""
    candidates: list[Path] = []
    if os.environ.get("DEDUP_PG_BIN"):
        candidates.append(Path(os.environ["DEDUP_PG_BIN"]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version_key(p.parent.name), reverse=True
    )
    candidates.extend(versions)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    for directory in candidates:
        if _has_server(directory):
            return directory
    # Last resort, imported only when needed: the pgserver wheel ships its own server binaries.
    with contextlib.suppress(ImportError):
        from pgserver._commands import POSTGRES_BIN_PATH  # type: ignore[import-not-found]

        if _has_server(Path(POSTGRES_BIN_PATH)):
            return Path(POSTGRES_BIN_PATH)
    raise EmbeddedPostgresError(
        "no PostgreSQL server binaries found (initdb, pg_ctl, postgres): install the postgresql package, "
        "`pip install pgserver`, set DEDUP_PG_BIN, or point DEDUP_DB_URL at a server"
    )


def _has_server(directory: Path) -> bool:
    return all((directory / tool).exists() for tool in ("initdb", "pg_ctl", "postgres"))


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def _run_as(data_dir: Path) -> _RunAs:
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        return _RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)
    if (data_dir / "PG_VERSION").exists():
        owner = data_dir.stat().st_uid
        if owner != 0:
            entry = pwd.getpwuid(owner)
            return _RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)
    names = [os.environ.get("DEDUP_PG_OS_USER") or "", "postgres", "dedup-pg"]
    for name in filter(None, names):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            if name != "dedup-pg":
                continue
            try:
                subprocess.run(
                    ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                    capture_output=True,
                    check=True,
                    timeout=30,
                )
                entry = pwd.getpwnam(name)
            except (OSError, subprocess.SubprocessError, KeyError):
                continue
        return _RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)
    entry = pwd.getpwnam("nobody")
    return _RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)


def _blocking_folder(path: Path, user: _RunAs) -> Path | None:
    """The first folder above ``path`` that ``user`` cannot enter, or None."""
    for parent in reversed(path.resolve().parents):
        st = parent.stat()
        if st.st_uid == user.uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid == user.gid:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return parent
    return None


def _check_traversable(path: Path, user: _RunAs) -> None:
    """The server user must be able to reach the data directory; say so clearly instead of failing in initdb."""
    parent = _blocking_folder(path, user)
    if parent is not None:
        raise EmbeddedPostgresError(
            f"the embedded PostgreSQL runs as user {user.name!r}, which cannot enter {parent} (mode "
            f"{stat.filemode(parent.stat().st_mode)}): use a data root outside it, `chmod o+x {parent}`, or set "
            f"DEDUP_DB_URL to an existing server"
        )


class EmbeddedPostgres:
    """Context manager: initdb once, start on a private socket directory, stop on exit.

    If a server is already running on `data_dir` (another process of the same data root started it),
    it is reused and left running on exit.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        settings: dict[str, str] | None = None,
        bin_dir: Path | None = None,
        startup_timeout: float = 60.0,
        init_fsync: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self._bin_dir = bin_dir
        self.startup_timeout = startup_timeout
        self.init_fsync = init_fsync
        self.started_here = False
        self._socket_dir: Path | None = None
        self._port: int | None = None
        self._lock_fh: Any = None

    # ---- public -----------------------------------------------------------------------------
    @property
    def dsn(self) -> str:
        if self._socket_dir is None or self._port is None:
            raise EmbeddedPostgresError("the embedded server is not running")
        return f"host={self._socket_dir} port={self._port} user=postgres dbname=postgres"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def start(self) -> str:
        """Start (or attach to) the server; return its DSN."""
        try:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbeddedPostgresError(f"cannot create the embedded registry's folder {self.data_dir.parent}: {exc}") from exc
        with self._locked():
            self.data_dir = self._reachable_data_dir()
            running = self._running_instance()
            if running is not None:
                self._socket_dir, self._port = running
                log.info("attached to the embedded PostgreSQL already running in %s", self.data_dir)
                return self.dsn
            bin_dir = self._bin_dir or find_bin_dir()
            user = _run_as(self.data_dir)
            _check_traversable(self.data_dir, user)
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb(bin_dir, user)
            socket_dir = Path(tempfile.mkdtemp(prefix="dedup-pg-"))
            os.chmod(socket_dir, 0o700)
            if os.geteuid() == 0:
                os.chown(socket_dir, user.uid, user.gid)
            port = _free_port()
            options = [f"-k {socket_dir}", f"-p {port}"]
            options += [f"-c {name}='{value}'" for name, value in self.settings.items()]
            cmd = [str(bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file), "-w"]
            cmd += ["-t", str(int(self.startup_timeout)), "-o", " ".join(options), "start"]
            result = subprocess.run(
                cmd,
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.startup_timeout + 30,
                **user.subprocess_kwargs(),
            )
            if result.returncode != 0:
                shutil.rmtree(socket_dir, ignore_errors=True)
                raise EmbeddedPostgresError(
                    f"pg_ctl start failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}\n"
                    f"server log {self.log_file}:\n{_tail(self.log_file)}"
                )
            self._socket_dir, self._port = socket_dir, port
            self.started_here = True
            log.info(
                "embedded PostgreSQL started in %s (socket %s, port %d)", self.data_dir, socket_dir, port
            )
            return self.dsn

    def stop(self) -> None:
        """Stop the server if this object started it (fast shutdown: open sessions are rolled back)."""
        if not self.started_here:
            return
        bin_dir = self._bin_dir or find_bin_dir()
        user = _run_as(self.data_dir)
        result = subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop"],
            cwd=self.data_dir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            **user.subprocess_kwargs(),
        )
        if result.returncode != 0 and self._running_instance() is not None:
            raise EmbeddedPostgresError(f"pg_ctl stop failed: {result.stderr.strip()}")
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
        self.started_here = False
        self._socket_dir = self._port = None

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- internals --------------------------------------------------------------------------
    def _reachable_data_dir(self) -> Path:
        """The cluster's real folder: ``data_dir`` (through the link of an earlier placement), or, for a
        new cluster that the server's user could not reach there, one under SERVER_PLACE with
        ``data_dir`` linked to it (module docstring)."""
        target = self.data_dir.resolve()
        if os.geteuid() != 0:
            return target
        user = _run_as(target)
        try:
            _check_traversable(target, user)
            return target
        except (EmbeddedPostgresError, FileNotFoundError) as refused:  # not found: a link to a place that is gone
            if self.data_dir.exists() and not self.data_dir.is_symlink():
                raise  # a cluster (or something else) is already there: moving it is the operator's call
            place = server_place(self.data_dir)
            try:
                SERVER_PLACE.mkdir(mode=0o755, parents=True, exist_ok=True)
                place.parent.mkdir(mode=0o700, exist_ok=True)
                os.chown(place.parent, user.uid, user.gid)
                _check_traversable(place, user)
                if self.data_dir.is_symlink():
                    self.data_dir.unlink()  # a link to a place that is gone: the cluster starts anew
                self.data_dir.symlink_to(place, target_is_directory=True)
            except (OSError, EmbeddedPostgresError) as exc:
                raise EmbeddedPostgresError(f"{refused}; placing it in {place} instead failed too: {exc}") from exc
            # Once per data root, on stderr too (a run's output, an Airflow task's log): where the data went.
            blocked = _blocking_folder(target.parent, user) if target.parent.exists() else None
            note = (f"embedded PostgreSQL data in {place} ({self.data_dir} links to it): the server runs as "
                    f"{user.name!r}, which cannot enter {blocked or 'the data root'}")
            log.warning(note)
            print(f"note: {note}", file=sys.stderr, flush=True)
            return place

    @contextlib.contextmanager
    def _locked(self) -> Any:
        # Two processes of one data root starting at once: one initdb/start, the other attaches.
        lock_path = self.data_dir.with_name(self.data_dir.name + ".lock")
        with open(lock_path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _initdb(self, bin_dir: Path, user: _RunAs) -> None:
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(f"{self.data_dir} is not empty but holds no PostgreSQL cluster")
        if os.geteuid() == 0:
            os.chown(self.data_dir, user.uid, user.gid)
        cmd = [str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", "postgres", "--auth=trust"]
        cmd += ["--encoding=UTF8", "--locale=C"]
        if not self.init_fsync:
            cmd.append("--no-sync")
        result = subprocess.run(
            cmd,
            cwd=self.data_dir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            **user.subprocess_kwargs(),
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"initdb failed in {self.data_dir}: {result.stderr.strip()}")
        log.info("initialised embedded PostgreSQL cluster in %s (server user %s)", self.data_dir, user.name)

    def _running_instance(self) -> tuple[Path, int] | None:
        """(socket dir, port) of a live server on this data directory, from its postmaster.pid."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
        except OSError:
            return None
        if len(lines) < 5:
            return None
        try:
            pid, port, socket_dir = int(lines[0]), int(lines[3]), Path(lines[4])
        except ValueError:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        if not (socket_dir / f".s.PGSQL.{port}").exists():
            return None
        return socket_dir, port


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_ready(dsn: str, timeout: float = 30.0) -> None:
    """Block until the server accepts connections (pg_ctl -w already waits; this guards attach races)."""
    import psycopg2

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg2.connect(dsn, connect_timeout=5).close()
            return
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
