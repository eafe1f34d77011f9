"""The pytest side of `--shard K/N` and of the selection record `pvchaos report merge` checks.

Applied last in the collection (trylast), after `-k`, `-m`, the upgrade and scale
deselections, so every shard splits the same final selection; the split itself is the
pure `pvchaos.shard.split`. Under xdist every worker collects and splits on its own; they
agree because the split depends only on the selection and the durations file.

Names created by a shard carry it (`PVCHAOS_SHARD`, read by `pvchaos.kube.naming`), so
N shard jobs pointed at one existing cluster never collide.

The selection record (`--selection-record FILE`, which `pvchaos run` passes) says which
tests the whole selection had (its fingerprint and ids) and which this shard ran, so a
merge can refuse reports of different test sets and see a test that no shard ran.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pvchaos.plugin.fixtures import cluster_request
from pvchaos.shard import Case, Shard, case_id, durations_from_history, fingerprint, parse_shard, split, split_key

SHARD_ENV = "PVCHAOS_SHARD"  # the shard's tag (s2), carried by every name the harness creates
_saved_env: list[str | None] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pvchaos", "pvchaos cluster options")
    group.addoption("--shard-durations", dest="shard_durations", default=None, metavar="PATH",
                    help="an Allure history.jsonl (or the directory holding it) whose durations balance --shard")
    group.addoption("--selection-record", dest="selection_record", default=None, metavar="FILE",
                    help="write the selected tests, their fingerprint and this shard's part there (JSON)")


def shard_of(config: pytest.Config) -> Shard | None:
    text = config.getoption("shard", default="") or ""
    return parse_shard(text) if text else None


def pytest_configure(config: pytest.Config) -> None:
    try:
        shard = shard_of(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    _saved_env.append(os.environ.get(SHARD_ENV))
    if shard is not None:
        os.environ[SHARD_ENV] = shard.tag
    else:
        os.environ.pop(SHARD_ENV, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _saved_env:  # an in-process session (pytester) leaves the environment as it found it
        old = _saved_env.pop()
        if old is None:
            os.environ.pop(SHARD_ENV, None)
        else:
            os.environ[SHARD_ENV] = old


def group_of(item: pytest.Item) -> str | None:
    """The cluster a test shares with others: its xdist_group, else its non-disruptive
    `cluster(...)` configuration; None for a test that starts nothing shared (an ordinary
    test uses the shard's shared cluster, which every shard starts anyway)."""
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return f"xdist_group:{marker.args[0] if marker.args else marker.kwargs.get('name', '')}"
    if item.get_closest_marker("disruptive") is not None or item.get_closest_marker("cluster") is None:
        return None
    try:
        return f"cluster:{cluster_request(item)!r}"
    except ValueError:
        return None  # reported by the plugin's own collection check


def item_id(item: pytest.Item) -> str:
    return case_id(item.path.stem, item.name)


def read_durations(path: str | None) -> dict[str, float]:
    """Durations from a history.jsonl, or a directory holding one; {} when there is none."""
    if not path:
        return {}
    source = Path(path)
    if source.is_dir():
        source = source / "history.jsonl"
    try:
        return durations_from_history(source.read_text(encoding="utf-8").splitlines())
    except OSError:
        return {}


def record(selected: list[str], mine: list[str], shard: Shard | None, durations: dict[str, float]) -> dict[str, Any]:
    """What the selection record holds (pure)."""
    return {"fingerprint": fingerprint(selected), "selected": sorted(selected), "shard": str(shard) if shard else None,
            "tests": sorted(mine), "split_key": split_key(durations), "durations_known": len(durations)}


def _write(path: Path, data: dict[str, Any]) -> None:
    """Atomically: every xdist worker writes the same content, none may see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".selection-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
    os.replace(tmp, path)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = shard_of(config)
    out = config.getoption("selection_record", default=None)
    if shard is None and not out:
        return
    durations = read_durations(config.getoption("shard_durations", default=None)) if shard else {}
    cases = [Case(item_id(i), group_of(i)) for i in items]
    selected = [c.id for c in cases]
    mine = set(split(cases, shard.total, durations)[shard.index - 1]) if shard else set(selected)
    if shard is not None:
        dropped = [i for i in items if item_id(i) not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if item_id(i) in mine]
    if out:
        _write(Path(out), record(selected, sorted(mine), shard, durations))
