"""The one validation layer for command-line values: each function checks one kind of
value and returns it, or raises `argparse.ArgumentTypeError` with the reason.

They are argparse `type=` callables, so `pvchaos` (every command and subcommand) and
the pytest plugin's options refuse a bad value while parsing, before any work starts,
with argparse naming the option ("argument --zones: ..."). `Options` fields carry the
same functions in their metadata (pvchaos/clusters/options.py), and `check_options`
applies them to options built in code, so the runner, `pvchaos upgrade` and the plugin
check exactly what the command line checks. tests/unit/test_bad_input.py draws wrong
values for every option that declares one of these, and fails when an option declares
none.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from pvchaos.clusters.local.config import parse_feature_gates
from pvchaos.clusters.topology import Topology
from pvchaos.tools.versions import SUPPORTED_MINORS, minor_of

Bad = argparse.ArgumentTypeError
MAX_NODES_PER_ZONE = 2000  # bench.storm's 5,000-node stretch is 3 x 1,667; beyond this a typo is likelier
MAX_STRESS_PODS = 1000  # the kubelet's own default is 110 pods a node; a node that takes fewer says so
MAX_WORKERS = 64
_PRINTABLE = re.compile(r"[\x00-\x1f\x7f]")
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
_PSEUDO_FS = ("/proc", "/sys", "/dev")


def _printable(text: str) -> str:
    if _PRINTABLE.search(text):
        raise Bad(f"{text!r} contains a control character")
    return text


def _non_empty_path(text: str) -> str:
    """`""` would mean the current directory to pathlib: refused, never guessed."""
    _printable(text)
    if not text.strip():
        raise Bad("empty path")
    return text


def zones(text: str) -> str:
    """`3` or `zone-a,zone-b`: between 1 and 26 zones, each a valid label value."""
    _printable(text)
    if not text.strip() or any(not z.strip() for z in text.split(",")):
        raise Bad(f"{text!r}: an empty zone name")
    try:
        Topology.parse(text)
    except ValueError as exc:
        raise Bad(str(exc).removeprefix("--zones: ")) from None
    return text


def nodes_per_zone(text: str) -> int:
    """A whole number from 1 to MAX_NODES_PER_ZONE."""
    return _bounded_int(text, 1, MAX_NODES_PER_ZONE)


def stress_pods(text: str) -> int:
    """A whole number from 1 to MAX_STRESS_PODS: pods (one claim each) on one node."""
    return _bounded_int(text, 1, MAX_STRESS_PODS)


def volume_limit(text: str) -> int:
    """The CSI driver's volumes per node: 0 (no limit, the CSI spec's unlimited) or more."""
    return _bounded_int(text, 0, 1_000_000)


def _bounded_int(text: str, low: int, high: int) -> int:
    if not re.fullmatch(r"-?[0-9]{1,12}", str(text).strip()):  # int() would take "٣" and "1_000"
        raise Bad(f"{text!r} is not a whole number")
    n = int(str(text).strip())
    if not low <= n <= high:
        raise Bad(f"{n} is out of range ({low} to {high})")
    return n


def workers(text: str) -> str:
    """`auto`, or a whole number of workers from 0 (one process) to MAX_WORKERS."""
    if text == "auto":
        return text
    _bounded_int(text, 0, MAX_WORKERS)
    return str(int(text))


def k8s_version(text: str) -> str:
    """A release we build, v1.MINOR.PATCH or a pre-release (v1.38.0-beta.0) with a supported
    minor (`""`: the default)."""
    if text == "":
        return text
    _printable(text)
    minor = minor_of(text, release_only=True)
    if minor is None:
        raise Bad(f"{text!r} is not a Kubernetes release version (want v1.MINOR.PATCH, e.g. v1.35.4, "
                  "or a pre-release such as v1.38.0-beta.0)")
    if minor not in SUPPORTED_MINORS:
        raise Bad(f"{text}: minor {minor} is not supported (supported: "
                  f"{', '.join(f'1.{m}' for m in SUPPORTED_MINORS)})")
    return text


def k8s_versions(text: str) -> str:
    """One version, or several comma-separated (`pvchaos run`'s version matrix)."""
    parts = text.split(",")
    if len(parts) > 1 and any(not p.strip() for p in parts):
        raise Bad(f"{text!r}: an empty item in the list")
    for part in parts:
        k8s_version(part.strip())
    return text


def feature_gates(text: str) -> str:
    """`A=true,B=false` (whether each gate exists is checked against the version later)."""
    _printable(text)
    try:
        parse_feature_gates(text)
    except ValueError as exc:
        raise Bad(str(exc).removeprefix("--feature-gates: ")) from None
    return text


def cluster_name(text: str) -> str:
    """A name that is a directory, a Docker name and a DNS label at once."""
    if not _DNS_LABEL.match(text):
        raise Bad(f"{text!r}: use 1-40 lowercase letters, digits and '-', starting and ending with a letter or digit")
    return text


def existing_file(text: str) -> str:
    """A regular file that can be read (a kubeconfig, a driver profile)."""
    _non_empty_path(text)
    path = Path(text)
    if not path.exists():
        raise Bad(f"{text}: no such file")
    if path.is_dir():
        raise Bad(f"{text}: is a directory, not a file")
    if not path.is_file():
        raise Bad(f"{text}: not a regular file")
    try:
        with path.open("rb") as f:
            f.read(1)
    except OSError as exc:
        raise Bad(f"{text}: cannot be read ({exc.strerror})") from None
    return text


def existing_path(text: str) -> str:
    """A file or directory that exists (a suite of one's own)."""
    _non_empty_path(text)
    if not Path(text).exists():
        raise Bad(f"{text}: no such file or directory")
    return text


def existing_dir(text: str) -> str:
    """A directory that exists (an earlier run's report directory)."""
    _non_empty_path(text)
    path = Path(text)
    if not path.is_dir():
        raise Bad(f"{text}: {'not a directory' if path.exists() else 'no such directory'}")
    return text


def writable_dir(text: str) -> str:
    """A directory that exists and can be written, or can be made. Checked by writing a
    probe file into the nearest existing ancestor and removing it, because permission
    bits lie to root and to read-only or pseudo file systems (/proc). Creates nothing
    that stays."""
    _printable(text)
    if not text.strip():
        raise Bad("empty path")
    path = Path(text).expanduser().absolute()
    if any(path == Path(p) or Path(p) in path.parents for p in _PSEUDO_FS):
        raise Bad(f"{text}: on a pseudo file system ({path.parts[1]}), not a place for files")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            raise Bad(f"{text}: no existing parent directory")
        probe = probe.parent
    if not probe.is_dir():
        raise Bad(f"{text}: {probe} is not a directory")
    try:
        fd, name = tempfile.mkstemp(prefix=".pvchaos-probe-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise Bad(f"{text}: cannot write in {probe} ({exc.strerror})") from None
    return text


def scale_size(text: str) -> str:
    """NODESxPODS, both whole numbers from 1 (the storm's shape; memory is checked later)."""
    m = re.fullmatch(r"(\d{1,6})x(\d{1,7})", text.strip())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise Bad(f"{text!r} is not NODESxPODS with both at least 1 (e.g. 60x120)")
    return text


def shard(text: str) -> str:
    """`K/N`: part K of N, 1 <= K <= N (`""`: no sharding)."""
    if text == "":
        return text
    m = re.fullmatch(r"(\d{1,4})/(\d{1,4})", text.strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise Bad(f"{text!r} is not K/N with 1 <= K <= N (e.g. 1/2)")
    return text


def kube_name(text: str) -> str:
    """A Kubernetes object name (namespace, pod): lowercase DNS label or subdomain."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", text):
        raise Bad(f"{text!r} is not a Kubernetes name (lowercase letters, digits, '-' and '.')")
    return text


def component_word(text: str) -> str:
    """A controller or scheduler plugin name (whether it exists is the component's call)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,80}", text):
        raise Bad(f"{text!r} is not a controller or plugin name (letters, digits and '-')")
    return text


def component_flag(text: str) -> str:
    """An extra component flag, `--name=value` or `--name`."""
    if not re.fullmatch(r"--[a-z0-9][a-z0-9-]*(=[^\x00-\x1f\x7f]*)?", text):
        raise Bad(f"{text!r} is not a flag (--name=value)")
    return text


def as_path(check: Callable[[str], str]) -> Callable[[str], Path]:
    """The same check, returning a Path (for arguments the command reads as paths)."""
    @functools.wraps(check)
    def checked(text: str) -> Path:
        return Path(check(text))
    return checked


def free_text(text: str) -> str:
    """Text passed on as it is (a pytest -k expression, a kubeconfig context): one line."""
    return _printable(text)


def kind_cluster_name(text: str) -> str:
    """The name of a kind cluster pvchaos started (`pvchaos cluster list` shows them):
    1-32 lowercase letters, digits and '-'."""
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", str(text)):
        raise Bad(f"{text!r}: not a kind cluster name (1-32 lowercase letters, digits and '-')")
    return text
