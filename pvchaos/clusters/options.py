"""The one declaration of the run options, rendered into every place that needs them.

`pvchaos run` (argparse), the pytest plugin (`addoption`), the pytest command line the
runner builds, and the cluster pool all read this dataclass, so an option added here
exists everywhere at once and they cannot drift (`pvchaos run --zones` once did not).
It lives in `clusters/` because the pool, the lowest layer that reads options, must
import it. Each field's metadata says its flag and whether pytest sees it too
(`pytest=False`: only `pvchaos run` has it, and turns it into pytest's own arguments).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from pvchaos.clusters import arguments
from pvchaos.clusters.common.gates import binary_gates as binary_gates  # re-exported
from pvchaos.clusters.common.gates import check_feature_gates as check_feature_gates  # re-exported
from pvchaos.tools.build import REPO_ROOT as REPO_ROOT  # re-exported (certify, upgrade_command, runner)
from pvchaos.tools.shipped import checkout_root


def _opt(flag: str, help: str, *, pytest: bool = True, action: str | None = None,
         choices: tuple[str, ...] | None = None, kind: type | None = None,
         check: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """A field's flag; `check` is its validator from pvchaos/clusters/arguments.py (an
    argparse `type=`), or None for a flag that takes no value."""
    return {"flag": flag, "help": help, "pytest": pytest, "action": action, "choices": choices, "type": kind,
            "check": check}


def backend_list(text: str) -> str:
    """`local`, or several backends comma-separated, each once. The registry is imported
    here, when a value is checked, so the option schema itself imports no backend (the
    backends and the pool import this module)."""
    from pvchaos.clusters import providers

    names = [b.strip() for b in text.split(",")]
    unknown = [b for b in names if b not in providers.names()]
    if not text or unknown or len(set(names)) != len(names):
        raise arguments.Bad(f"{text!r}: give one or more of {', '.join(providers.names())}, comma-separated, each once")
    return text


def suite_names(text: str) -> str:
    """Comma-separated suite names (file names in suites/ without `test_`)."""
    if not re.fullmatch(r"[a-z0-9_]+(,[a-z0-9_]+)*", text):
        raise arguments.Bad(f"{text!r}: suite names are lowercase words with '_', comma-separated")
    return text


@dataclass(frozen=True)
class Options:
    """Everything a run can be told; defaults are what `pvchaos run` does with no flags."""

    backend: str = field(default="local", metadata=_opt(
        "--backend", "where the suites run: local (default; a real control plane with KWOK nodes), kind or "
        "existing; `pvchaos run` takes several, comma-separated (local,kind), and compares their verdicts", check=backend_list))
    k8s_version: str = field(default="", metadata=_opt(
        "--k8s-version", "Kubernetes version of local (or kind) clusters, e.g. v1.35.4", check=arguments.k8s_versions))
    zones: str = field(default="3", metadata=_opt(
        "--zones", "number of zones of local clusters, or a comma-separated list of names", check=arguments.zones))
    nodes_per_zone: int = field(default=2, metadata=_opt("--nodes-per-zone", "nodes per zone of local clusters",
                                                         kind=int, check=arguments.nodes_per_zone))
    feature_gates: str = field(default="", metadata=_opt(
        "--feature-gates", "extra gates for local clusters, A=true,B=false", check=arguments.feature_gates))
    kubeconfig: str | None = field(default=None, metadata=_opt(
        "--kubeconfig", "kubeconfig of an existing cluster (--backend existing)", check=arguments.existing_file))
    context: str | None = field(default=None, metadata=_opt("--context", "context in --kubeconfig", check=arguments.free_text))
    allow_disruptive: bool = field(default=False, metadata=_opt(
        "--allow-disruptive", "allow node/zone faults and label changes on a cluster pvchaos did not create",
        action="store_true"))
    allow_contexts: tuple[str, ...] = field(default=(), metadata=_opt(
        "--allow-context", "a context name disruptive suites may run against (repeatable)", action="append",
        check=arguments.free_text))
    keep_cluster: bool = field(default=False, metadata=_opt(
        "--keep-cluster", "leave shared clusters running after the run", action="store_true"))
    profile: str | None = field(default=None, metadata=_opt(
        "--profile", "a driver profile (upstream external storage test driver file)", check=arguments.existing_file))
    driver_package: str | None = field(default=None, metadata=_opt(
        "--driver-package", "a vendor's CSI driver package directory (manifests, images/*.tar; docs/certify.md), "
        "installed as the storage of every kind cluster of the run instead of pvchaos-csi", check=arguments.existing_dir))
    kind_cluster: str | None = field(default=None, metadata=_opt(
        "--kind-cluster", "run on this pvchaos kind cluster (`pvchaos cluster up --backend kind --name N`, or "
        "certify's) instead of starting one; it is left running", check=arguments.kind_cluster_name))
    no_canaries: bool = field(default=False, metadata=_opt(
        "--no-canaries", "skip the per-cluster canaries (pvchaos/kit/canaries.py): every test then waits out "
        "its own timeouts on a broken cluster, as the detection-power self-checks need", action="store_true"))
    quick: bool = field(default=False, metadata=_opt(
        "--quick", "only each suite's core test (marker quick): a change's first feedback in about a minute; "
        "the full run stays the gate", action="store_true"))
    scale: bool = field(default=False, metadata=_opt(
        "--scale", "also run the tests marked scale (PVC storms: suites/test_scale.py); without it they are "
        "deselected", action="store_true"))
    scale_size: str = field(default="60x120", metadata=_opt(
        "--scale-size", "NODESxPODS of the scale suite's storms (default 60x120, sized for CI; "
        "bench/storm.py runs 1000x2000)", check=arguments.scale_size))
    stress_pods: int = field(default=20, metadata=_opt(
        "--stress-pods", "pods, one claim each, that the volume stress suite puts on one node (default 20, "
        "sized for 2 cores; suites/test_volume_stress.py)", kind=int, check=arguments.stress_pods))
    shard: str = field(default="", metadata=_opt(
        "--shard", "K/N: run only part K of N of the selected tests (the same split on every machine, balanced "
        "by the report history's durations; `pvchaos report merge` joins the parts' reports)", check=arguments.shard))
    # -- `pvchaos run` only: rendered into pytest's own arguments ------------------------------
    suites: tuple[str, ...] = field(default=(), metadata=_opt(
        "--suites", "comma-separated suite names (default: all)", pytest=False, action="append", check=suite_names))
    keyword: str | None = field(default=None, metadata=_opt("-k", "pytest -k expression", pytest=False,
                                                            check=arguments.free_text))
    workers: str = field(default="auto", metadata=_opt(
        "--workers", "parallel workers (pytest-xdist); 0 runs in one process", pytest=False, check=arguments.workers))
    report_dir: Path = field(default_factory=lambda: default_report_dir(), metadata=_opt(  # noqa: PLW0108  defined below
        "--report-dir", "where the Allure results, report, JUnit XML and summary go", pytest=False, kind=Path,
        check=arguments.writable_dir))
    pytest_args: tuple[str, ...] = ()  # after `--` on the command line, passed to pytest as they are
    paths: tuple[str, ...] = ()  # `pvchaos run PATH...`: the user's own suite files or directories


def default_report_dir() -> Path:
    """`reports/` of the checkout when pvchaos runs from one (its built-in suites live
    there), else `reports/` under the current directory (an installed pvchaos)."""
    checkout = checkout_root()
    return (checkout / "reports") if checkout is not None else Path.cwd() / "reports"


def _default(f: Field[Any]) -> Any:
    """A field's default, calling its factory where it has one (the report directory)."""
    return f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default


def _declared() -> list[tuple[str, Mapping[str, Any], Any]]:
    """(field name, metadata, default) of every option with a flag."""
    return [(f.name, f.metadata, _default(f))
            for f in fields(Options) if f.metadata and (f.default is not MISSING or f.default_factory is not MISSING)]


def add_options(add: Callable[..., Any], pytest_side: bool) -> None:
    """Declare the options on an argparse parser's or a pytest group's `add...` method
    (both take the same keywords); `pytest_side` leaves out the run-only ones."""
    for name, meta, default in _declared():
        if pytest_side and not meta["pytest"]:
            continue
        kwargs: dict[str, Any] = {"dest": name, "help": meta["help"]}
        if meta["action"]:
            kwargs["action"] = meta["action"]
            kwargs["default"] = [] if meta["action"] == "append" else default
        else:
            kwargs["default"] = default
        if meta["choices"]:
            kwargs["choices"] = meta["choices"]
        if meta["check"] is not None:
            kwargs["type"] = meta["check"]
        elif meta["type"] is int:
            kwargs["type"] = int
        add(meta["flag"], **kwargs)


def check_options(options: Options) -> None:
    """Every option's own check (the same ones the command line applies), for options
    built in code or taken from pytest's config: ValueError naming the flag and value."""
    for name, meta, default in _declared():
        check = meta["check"]
        value = getattr(options, name)
        if check is None or value == default or value is None:
            continue
        for one in (value if isinstance(value, tuple) else (value,)):
            try:
                check(str(one))
            except argparse.ArgumentTypeError as exc:
                raise ValueError(f"{meta['flag']} {one}: {exc}") from None


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """`pvchaos run`'s arguments: every option, and the user's own suite paths; what
    follows `--` goes to pytest (split off before parsing: `split_pytest_args`)."""
    add_options(parser.add_argument, pytest_side=False)
    parser.add_argument("paths", nargs="*", metavar="PATH", type=arguments.existing_path,
                        help="your own suite files or directories, run with the same options, summary and report "
                             "(alone, or with --suites for built-in ones too)")


def split_pytest_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """`run A B -- -x --lf` -> (["run", "A", "B"], ["-x", "--lf"]): what follows the first
    `--` is pytest's, so a PATH and pytest's own flags cannot be confused."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def from_values(get: Callable[[str], Any], pytest_side: bool) -> Options:
    """Options from parsed values (`vars(namespace).get` or pytest's `config.getoption`)."""
    values: dict[str, Any] = {}
    for name, meta, _ in _declared():
        if pytest_side and not meta["pytest"]:
            continue
        value = get(name)
        if name == "suites":
            value = tuple(s for part in value or () for s in str(part).split(",") if s)
        elif meta["action"] == "append":
            value = tuple(value or ())
        elif meta["type"] is Path and value is not None:
            value = Path(value).resolve()
        values[name] = value
    if not pytest_side:
        extra = list(get("pytest_args") or ())
        values["pytest_args"] = tuple(extra[1:] if extra[:1] == ["--"] else extra)
        values["paths"] = tuple(str(p) for p in get("paths") or ())
    return Options(**values)


def pytest_flags(options: Options) -> list[str]:
    """The pytest-side options that differ from their defaults, as `--flag=value` arguments."""
    argv: list[str] = []
    for name, meta, default in _declared():
        value = getattr(options, name)
        if not meta["pytest"] or value == default or value == ():
            continue
        if meta["action"] == "store_true":
            argv.append(meta["flag"])
        elif meta["action"] == "append":
            argv += [f"{meta['flag']}={v}" for v in value]
        elif value is not None and value != "":
            argv.append(f"{meta['flag']}={value}")
    return argv
