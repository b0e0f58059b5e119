"""Debian packages the test suite needs beyond PostgreSQL itself (Chromium, pg_auto_failover, pgbouncer).

``ensure_package(package, binary)`` returns the path of ``binary`` (a
command name looked up on PATH, or an absolute path), installing Debian's
``package`` with ``apt-get update`` then ``apt-get install -y`` when it is
missing and the suite runs as root (CI, a fresh machine); otherwise it
returns ``None`` and the reason. One installer at a time on this machine
(parallel test workers, other checkouts): apt holds its own lock and fails
a second one, so the installers queue on a file lock and the later ones
find the package installed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["ensure_package"]

INSTALL_TIMEOUT = 900  # seconds for each apt-get step


def _find(binary: str) -> str | None:
    if os.path.isabs(binary):
        return binary if os.access(binary, os.X_OK) else None
    return shutil.which(binary)


def ensure_package(package: str, binary: str) -> tuple[str | None, str]:
    """``(path of binary, "")``, installing ``package`` if needed; or ``(None, reason)``."""
    found = _find(binary)
    if found:
        return found, ""
    if os.geteuid() != 0:
        return None, f"{binary} is not installed and this is not root (apt-get install -y {package})"
    with open(Path(tempfile.gettempdir()) / "durastate-apt-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _find(binary)
        if found:
            return found, ""
        # Another apt (a checkout not using this lock, the machine's own updates) may hold dpkg's lock: wait.
        wait = ["-o", f"DPkg::Lock::Timeout={INSTALL_TIMEOUT}"]
        for command in (["apt-get", *wait, "update"], ["apt-get", *wait, "install", "-y", package]):
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
            if done.returncode != 0:
                return None, f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}"
    found = _find(binary)
    return (found, "") if found else (None, f"apt-get installed {package} but {binary} is not there")
