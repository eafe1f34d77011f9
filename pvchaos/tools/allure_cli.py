"""Make the Allure report CLI available, installed from npm into our cache, pinned.

We use Allure Report 3 (npm package `allure`) with its `allure2` plugin: it renders the
classic Allure overview (trend, categories, environment, suites) in Node.js alone, so
no Java is needed, and its single-file report opens from file://. `allure-commandline`
2.x renders the same report too, but needs a JVM and, as a directory report, a web
server to be viewed; see docs/reports.md.

The package goes into `<cache>/node/` (`$PVCHAOS_CACHE` or `.cache/` in the repo) with
`npm install --prefix`; a later call finds it there and does not touch the network.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pvchaos.tools.build import cache_root

ALLURE_PACKAGE = "allure"
ALLURE_VERSION = "3.18.0"
INSTALL_TIMEOUT_S = 600


class AllureCliError(RuntimeError):
    """The Allure CLI could not be made available; the message is one line saying why."""


def _log(msg: str) -> None:
    print(f"[pvchaos allure] {msg}", file=sys.stderr, flush=True)


def node_dir() -> Path:
    """The npm prefix the CLI is installed into (under the shared cache root)."""
    return cache_root() / "node"


def _bin(prefix: Path) -> Path:
    return prefix / "node_modules" / ".bin" / "allure"


def installed_version(prefix: Path | None = None) -> str | None:
    """The version of `allure` under `prefix`, or None when it is not installed."""
    manifest = (prefix or node_dir()) / "node_modules" / ALLURE_PACKAGE / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


@contextlib.contextmanager
def _locked(prefix: Path) -> Iterator[None]:
    """Serialise installs: pytest-xdist workers may all ask for the CLI at once."""
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _require(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise AllureCliError(f"{tool}: not found on PATH; {hint}")
    return path


def ensure_allure() -> Path:
    """Return the path of the pinned Allure CLI, installing it with npm on first use."""
    prefix = node_dir()
    cli = _bin(prefix)
    if installed_version(prefix) == ALLURE_VERSION and cli.exists():
        return cli
    _require("node", "install Node.js 20+ (Debian: apt-get install -y nodejs npm)")
    npm = _require("npm", "install npm (Debian: apt-get install -y npm)")
    with _locked(prefix):
        if installed_version(prefix) == ALLURE_VERSION and cli.exists():
            return cli  # another worker installed it while we waited
        spec = f"{ALLURE_PACKAGE}@{ALLURE_VERSION}"
        _log(f"installing {spec} into {prefix} (first use; about 10 s)")
        started = time.monotonic()
        cmd = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
               "--no-update-notifier", "--loglevel=error", spec]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise AllureCliError(f"npm install {spec}: no answer within {INSTALL_TIMEOUT_S}s") from None
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()
            reason = next((ln for ln in reversed(last) if ln.strip()), f"exit {proc.returncode}")
            raise AllureCliError(f"npm install {spec} failed: {reason.strip()}")
        if installed_version(prefix) != ALLURE_VERSION or not cli.exists():
            raise AllureCliError(f"npm install {spec} finished but {cli} is missing")
        _log(f"installed {spec} in {time.monotonic() - started:.1f}s")
    return cli


def main() -> int:
    """`python -m pvchaos.tools.allure_cli`: print the CLI path, or one line saying why not."""
    try:
        print(ensure_allure())
    except AllureCliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
