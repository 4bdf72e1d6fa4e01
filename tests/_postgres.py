"""A private PostgreSQL server for the multi-worker tests: a fresh cluster in a temporary folder.

It uses the Debian ``postgresql`` binaries (``.ci/run`` installs the package when it is missing), runs
as the ``postgres`` user when the suite runs as root (initdb refuses root), listens on 127.0.0.1 on a
free port, and is stopped when the session ends. Nothing is mocked: Optuna talks to a real server.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def find_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin folder, or None."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    found = candidates[-1] if candidates else shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """initdb + pg_ctl start in ``folder``; ``url`` is a SQLAlchemy URL for database ``freezestats``."""

    def __init__(self, bin_dir: Path, folder: Path) -> None:
        self.bin_dir = bin_dir
        self.folder = folder
        self.port = _free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.password = "freeze-secret"
        self.url = f"postgresql+psycopg2://postgres:{self.password}@127.0.0.1:{self.port}/freezestats"

    def _run(self, *args: str) -> None:
        env = {**os.environ, "PGPASSWORD": self.password}
        subprocess.run(
            [*self.as_user, *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            env=env,
        )

    def start(self) -> None:
        data = self.folder / "data"
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.as_user:
            shutil.chown(self.folder, "postgres", "postgres")
            os.chmod(self.folder, 0o755)
            for parent in self.folder.parents:  # postgres must be able to reach its folder
                if str(parent).startswith("/tmp/") or str(parent) == "/tmp":
                    os.chmod(parent, os.stat(parent).st_mode | 0o011)
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password + "\n")
        if self.as_user:
            shutil.chown(pwfile, "postgres", "postgres")
        # TCP connections need the password (so a wrong one is refused, as on a real server).
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
        )
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.folder / "log"),
            "-w",
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=100",
            "start",
        )
        for _ in range(50):
            probe = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
            )
            if probe.returncode == 0:
                break
            time.sleep(0.2)
        self._run(
            str(self.bin_dir / "createdb"),
            "-h",
            str(self.folder),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "freezestats",
        )

    def stop(self) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
