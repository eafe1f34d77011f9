"""Bad input by construction: every option of every `pvchaos` command, walked from the
parser itself, gets wrong values drawn by the class of its check (pvchaos/clusters/
arguments.py). Each drawn command line must end in exit 2 with exactly one line on
stderr that names the option, no traceback, within seconds, starting no process and
leaving nothing under the state root, the report directory or the temp directory.

It runs in-process (hundreds of command lines in seconds): a command that accepted the
wrong value would go on to build, start a cluster or run pytest, and the first process
it tried to start fails the example instead. An option that declares no check fails
the walk, so a new option cannot skip validation. Seed: fixed in CI (the `ci` profile
in tests/conftest.py); explore with `--hypothesis-seed N` or `--hypothesis-profile explore`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvchaos import certify, cli
from pvchaos.clusters import arguments, options

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT / "tests" / "unit" / "data" / "compare"

# A valid, otherwise harmless command line per command: with every option right it would
# start real work (which the guard turns into a failure), so a wrong value that slips
# through is caught.
BASES: dict[tuple[str, ...], list[str]] = {
    ("run",): ["run", "--suites", "reclaim", "--workers", "0"],
    ("cluster", "up"): ["cluster", "up", "--name", "probe"],
    ("cluster", "down"): ["cluster", "down", "--name", "probe"],
    ("build",): ["build"],
    ("upgrade",): ["upgrade", "--to", "v1.36.3"],
    ("compare",): ["compare", str(COMPARE / "healthy"), str(COMPARE / "broken")],
    ("kind", "build-image"): ["kind", "build-image"],
    ("explain",): ["explain", "app"],
    ("selftest",): ["selftest"],
    ("certify",): ["certify", "--driver-dir", str(ROOT / "examples" / "vendor-driver"), "--backend", "existing",
                   "--kubeconfig", str(ROOT / "pyproject.toml")],
    ("report", "merge"): ["report", "merge", "OUT", str(COMPARE / "healthy"), str(COMPARE / "broken")],
}
# Options that take no value to get wrong, or pass text on untouched by design.
EXEMPT = {"help", "pytest_args"}


def _control(text: str) -> str:
    return text + "\x07"


def _files(tmp: Path) -> dict[str, Path]:
    """Real paths of every shape the path checks must tell apart."""
    a_file = tmp / "a-file.txt"
    a_file.write_text("x")
    a_dir = tmp / "a-dir"
    a_dir.mkdir()
    return {"file": a_file, "dir": a_dir}


def wrong_values(check: Callable[[str], object], tmp: dict[str, Path]) -> st.SearchStrategy[str]:
    """Wrong values for one kind of check, by class: out of range, malformed, pseudo file
    systems, the wrong kind of path, separators, `..`, unicode and control characters."""
    f, d = str(tmp["file"]), str(tmp["dir"])
    numbers_out = st.one_of(st.integers(max_value=0).map(str), st.integers(min_value=10**6).map(str))
    garbage = st.sampled_from(["x", "1.5", "", " ", "1e3", "٣", "0x10", _control("2")])
    table: dict[Callable[[str], object], st.SearchStrategy[str]] = {
        arguments.nodes_per_zone: st.one_of(numbers_out, garbage,
                                            st.integers(arguments.MAX_NODES_PER_ZONE + 1).map(str)),
        arguments.stress_pods: st.one_of(numbers_out, garbage, st.integers(arguments.MAX_STRESS_PODS + 1).map(str)),
        arguments.volume_limit: st.one_of(st.integers(max_value=-1).map(str), garbage,
                                          st.integers(1_000_001).map(str)),
        arguments.workers: st.one_of(st.integers(max_value=-1).map(str), garbage,
                                     st.integers(arguments.MAX_WORKERS + 1).map(str)),
        arguments.zones: st.one_of(st.sampled_from(["0", "27", "-1", "A_B", "zone a", "a/b", "..", "a,,b", "",
                                                    "zöne", _control("a"), ",", "a," * 30 + "a"]),
                                   st.integers(27, 10**9).map(str)),
        arguments.k8s_version: st.sampled_from(["v9.1.1", "1.35", "latest", "v1.99.0", "v1.33.0", "v1.35",
                                                "v1.35.4-gke.1", "v1.38.0-beta", "../v1.35.4", _control("v1.35.4")]),
        arguments.k8s_versions: st.sampled_from(["v9.1.1", "v1.35.4,", ",", "v1.35.4,,v1.36.3", "v1.35.4,latest"]),
        arguments.feature_gates: st.sampled_from(["A", "A=maybe", "=true", "A=true,B", "A=true=false",
                                                  _control("A") + "=true", "A:true"]),
        arguments.existing_file: st.sampled_from([d, f + "/nope", str(tmp["dir"] / "missing.yaml"), "",
                                                  "/proc/self", _control(f), "/dev/null/x"]),
        arguments.existing_dir: st.sampled_from([f, str(tmp["dir"] / "missing"), "", _control(d)]),
        arguments.existing_path: st.sampled_from([str(tmp["dir"] / "missing"), "", _control(f), f + "/x"]),
        arguments.writable_dir: st.sampled_from(["/proc/x", "/proc", "/sys/x", "/dev/shm/../x", f, f + "/sub",
                                                 "", " ", _control(d + "/r"), "/proc/self/fd/x"]),
        arguments.cluster_name: st.one_of(st.sampled_from(["A", "a/b", "..", "-a", "a-", "a" * 41, "", "é",
                                                           "a b", "a_b", _control("a")]),
                                          st.text(min_size=1, max_size=8).filter(
                                              lambda s: not arguments._DNS_LABEL.match(s))),
        arguments.scale_size: st.sampled_from(["0x10", "10x0", "10", "x", "-1x5", "10x10x10", "", "10X10"]),
        arguments.shard: st.sampled_from(["0/3", "4/3", "a/b", "1/0", "1", "/", "1/2/3", "-1/2", "1/99999"]),
        arguments.kube_name: st.sampled_from(["BAD", "a_b", "", "-a", "a" * 300, "a/b", "é", _control("a")]),
        arguments.component_word: st.sampled_from(["", "a b", "../x", "-x", "é", _control("x")]),
        arguments.component_flag: st.sampled_from(["x", "-x", "--X=1", "--", _control("--a="), "---a"]),
        arguments.free_text: st.sampled_from([_control("a"), "a\nb", "\x1b[31m"]),
        options.backend_list: st.sampled_from(["cloud", "local,local", "local,", "", "Local", "kind,,local"]),
        options.suite_names: st.sampled_from(["Reclaim", "a-b", "..", "a,,b", "", "../x", "é"]),
        certify.suite_list: st.sampled_from(["Reclaim", "a-b", "..", "", "../x", "é", "nosuch", "reclaim,nosuch"]),
        arguments.kind_cluster_name: st.sampled_from(["Kind", "-a", "a_b", "", "a" * 33, _control("a")]),
        certify.tier_list: st.sampled_from(["fast", "core,", "", "Core", "core,nosuch"]),
        certify.wait_seconds: st.sampled_from(["0", "4", "3601", "x", "", "-5", "1e3", "٣", _control("9")]),
    }
    for extra in getattr(options, "EXTRA_CHECK_VALUES", {}).items():  # checks other modules declare
        table.setdefault(*extra)
    if check not in table:
        raise LookupError(f"no wrong values known for {check.__module__}.{check.__qualname__}: add them here")
    return table[check]


@dataclass(frozen=True)
class Slot:
    """One option of one command: where to put a wrong value, and how the message names it."""

    command: tuple[str, ...]
    flag: str | None  # None: positional
    dest: str
    names: tuple[str, ...]  # what the one line must mention (a flag, a metavar or the dest)
    check: Callable[[str], object] | None
    choices: tuple[str, ...] | None


def _subparsers(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, p
        return
    for name, child in subs[0].choices.items():
        yield from _subparsers(child, (*path, name))


def slots() -> list[Slot]:
    """Every option of every command that takes a value, walked from the parser."""
    out = []
    for command, p in _subparsers(cli.parser()):
        for action in p._actions:
            if action.dest in EXEMPT or action.nargs == 0 or isinstance(action, argparse._SubParsersAction):
                continue
            flag = max(action.option_strings, key=len) if action.option_strings else None
            names = (*action.option_strings, action.metavar or "", action.dest)
            out.append(Slot(command, flag, action.dest, tuple(n for n in names if n),
                            action.type if callable(action.type) else None,
                            tuple(action.choices) if action.choices else None))
    return out


SLOTS = slots()


def test_every_command_has_a_base_and_every_option_a_check() -> None:
    """The walk covers every command, and no option that takes a value goes unchecked."""
    commands = {s.command for s in SLOTS}
    assert commands <= set(BASES), f"commands with no base command line here: {sorted(commands - set(BASES))}"
    unchecked = [f"{' '.join(s.command)} {s.flag or s.dest}" for s in SLOTS if s.check is None and not s.choices]
    assert not unchecked, f"options without a check (pvchaos/clusters/arguments.py): {unchecked}"


def _argv(slot: Slot, value: str, report_dir: Path) -> list[str]:
    base = list(BASES[slot.command])
    if slot.command == ("run",) and slot.dest != "report_dir":
        base += ["--report-dir", str(report_dir)]
    if slot.flag is None:  # a positional: replace the base's own value of it, or add it
        if slot.command == ("compare",):
            i = 1 if slot.dest == "report_a" else 2
            base[i] = value
            return base
        if slot.command == ("explain",):
            return ["explain", value]
        if slot.command == ("report", "merge"):
            out = value if slot.dest == "out" else str(report_dir / "merged")
            dirs = [value] if slot.dest == "dirs" else base[4:]
            return ["report", "merge", out, *dirs]
        return [*base, value]
    if slot.flag in base:  # the base sets it: replace that value
        i = base.index(slot.flag)
        return [*base[:i], slot.flag, value, *base[i + 2:]]
    return [*base, slot.flag, value]


@contextlib.contextmanager
def no_process_may_start(started: list[str]) -> Iterator[None]:
    """Any attempt to start a process records its argv and fails: the command should
    have refused its input before doing any work."""
    real = subprocess.Popen

    class Refused(real):  # type: ignore[misc, valid-type]
        def __init__(self, args: object, *a: object, **k: object) -> None:
            started.append(str(args))
            raise AssertionError(f"a process was started: {args}")

    subprocess.Popen = Refused  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = real  # type: ignore[misc]


def _snapshot(*roots: Path) -> set[str]:
    return {str(p) for r in roots if r.exists() for p in r.rglob("*")}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """State root, temp dir and report dir of the probes, and real paths of each shape."""
    root = tmp_path_factory.mktemp("bad-input")
    state, temp, reports = root / "state", root / "tmp", root / "reports"
    for d in (state, temp):
        d.mkdir()
    saved = {k: os.environ.get(k) for k in ("PVCHAOS_STATE_DIR", "TMPDIR", "KUBECONFIG")}
    os.environ.update({"PVCHAOS_STATE_DIR": str(state), "TMPDIR": str(temp),
                       "KUBECONFIG": str(root / "no-kubeconfig")})
    tempfile.tempdir = str(temp)
    shapes = _files(root)
    try:
        yield {"state": state, "temp": temp, "reports": reports, **shapes}
    finally:
        tempfile.tempdir = None
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _draw(slot: Slot, tmp: dict[str, Path]) -> st.SearchStrategy[str]:
    if slot.check is not None:
        return wrong_values(getattr(slot.check, "__wrapped__", slot.check), tmp)  # arguments.as_path wraps
    return st.text(min_size=1, max_size=12).filter(lambda w: w not in (slot.choices or ()) and not w.startswith("-"))


def _case(tmp: dict[str, Path]) -> st.SearchStrategy[tuple[Slot, str]]:
    return st.sampled_from(SLOTS).flatmap(lambda s: _draw(s, tmp).map(lambda v: (s, v)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(data=st.data())
def test_any_wrong_value_is_one_line_exit_2_and_leaves_nothing(sandbox: dict[str, Path], data: st.DataObject) -> None:
    slot, value = data.draw(_case(sandbox))
    argv = _argv(slot, value, sandbox["reports"])
    shown = " ".join(repr(a) if not a.isprintable() or " " in a or not a else a for a in argv)
    before = _snapshot(sandbox["state"], sandbox["temp"], sandbox["reports"])
    started: list[str] = []
    err = io.StringIO()
    handler = signal.getsignal(signal.SIGTERM)
    t0 = time.monotonic()
    with no_process_may_start(started), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except AssertionError:
            code = -1
    signal.signal(signal.SIGTERM, handler)
    seconds = time.monotonic() - t0
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    where = f"\n  command: pvchaos {shown}\n  stderr: {err.getvalue()[-1500:]!r}"
    assert not started, f"accepted the wrong value and started a process ({started[0][:200]}){where}"
    assert code == 2, f"exit {code}, want 2{where}"
    assert "Traceback" not in err.getvalue(), f"a traceback{where}"
    assert len(lines) == 1, f"{len(lines)} lines on stderr, want exactly 1{where}"
    assert any(n in lines[0] for n in slot.names) or (value and value in lines[0]), \
        f"the line names neither the option ({', '.join(slot.names)}) nor the value{where}"
    assert seconds < 5, f"took {seconds:.1f}s{where}"
    after = _snapshot(sandbox["state"], sandbox["temp"], sandbox["reports"])
    assert after == before, f"left behind: {sorted(after - before)[:5]}{where}"


def test_the_report_dir_check_writes_nothing_that_stays(tmp_path: Path) -> None:
    """The probe that replaces permission bits (which lie to root) cleans up after itself."""
    assert arguments.writable_dir(str(tmp_path / "new" / "deeper")) and not any(tmp_path.iterdir())
    with pytest.raises(argparse.ArgumentTypeError, match="pseudo file system"):
        arguments.writable_dir("/proc/x")
