"""`run.json`: what a report directory is a report of, written by `pvchaos run`.

Why: `pvchaos report merge` joins report directories that CI jobs wrote on different
machines (shards, backends, Kubernetes versions). Joining reports of different test sets,
or of different versions of pvchaos, would give a report whose counts mean nothing, and
a shard that ran the wrong part would go unseen. So every run records the pvchaos
version and commit, the backend, the Kubernetes version, its shard, and the selection
(`pvchaos.plugin.sharding` writes it at collection: every selected test id, its
fingerprint, the ids this shard ran, a digest of the durations that balanced the split).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pvchaos.tools.build import REPO_ROOT

RUN_FILE = "run.json"
SELECTION_FILE = "selection.json"  # the plugin's part, folded into run.json by the runner
FORMAT = 1


@dataclass(frozen=True)
class RunRecord:
    """One report directory's identity."""

    pvchaos: str
    commit: str | None
    backend: str
    kubernetes: str
    shard: str | None = None  # "2/3"; None: the whole selection
    fingerprint: str | None = None  # of the whole selection (before the split)
    selected: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()  # what this shard ran
    split_key: str | None = None
    suites: tuple[str, ...] = ()
    keyword: str | None = None
    interrupted: bool = False
    format: int = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> tuple[str, str]:
        """The runs that shards of one run share: backend and Kubernetes version."""
        return (self.backend, self.kubernetes)


def pvchaos_version() -> str:
    try:
        return metadata.version("pvchaos")
    except metadata.PackageNotFoundError:
        return "unknown"


def source_commit() -> str | None:
    """The checkout's commit, when pvchaos runs from one (None for an installed wheel)."""
    if not (REPO_ROOT / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def build(*, backend: str, kubernetes: str, shard: str | None, selection: dict[str, Any] | None,
          suites: tuple[str, ...] = (), keyword: str | None = None, interrupted: bool = False,
          version: str | None = None, commit: str | None = None) -> RunRecord:
    """The record of a run from what the runner knows and the plugin's selection (pure)."""
    sel = selection or {}
    return RunRecord(pvchaos=version or pvchaos_version(), commit=commit, backend=backend, kubernetes=kubernetes,
                     shard=shard or None, fingerprint=sel.get("fingerprint"),
                     selected=tuple(sel.get("selected") or ()), tests=tuple(sel.get("tests") or ()),
                     split_key=sel.get("split_key"), suites=tuple(suites), keyword=keyword, interrupted=interrupted)


def to_json(record: RunRecord) -> str:
    return json.dumps(asdict(record), indent=1) + "\n"


def from_json(text: str, where: str = RUN_FILE) -> RunRecord:
    """A record from run.json text; ValueError with one line when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError(f"{where}: not JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{where}: not a run record of format {FORMAT} (written by another version of pvchaos?)")
    known = set(RunRecord.__dataclass_fields__)
    try:
        kwargs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        return RunRecord(**kwargs)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_selection(report_dir: Path) -> dict[str, Any] | None:
    """The plugin's selection record in a report directory, if the run got that far."""
    try:
        return json.loads((report_dir / SELECTION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write(report_dir: Path, record: RunRecord) -> Path:
    path = report_dir / RUN_FILE
    path.write_text(to_json(record), encoding="utf-8")
    return path


def read(report_dir: Path) -> RunRecord:
    path = report_dir / RUN_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise ValueError(f"{report_dir}: no {RUN_FILE} (not a report directory of `pvchaos run --report-dir`, "
                         "or one written before pvchaos recorded runs)") from None
    return from_json(text, str(path))
