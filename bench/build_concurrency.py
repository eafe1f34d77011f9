"""Does building independent binaries at the same time pay on this machine (issue 38)?

Go already compiles the packages of one `go build` in parallel (one per core), so on 2
cores two builds at once only win what one build leaves idle: its link step, package
loading and the tail of its dependency graph. This measures it on upstream's two CSI
sidecars (external-provisioner and external-attacher: the largest independent builds
after Kubernetes, with little shared code between them): both from an empty Go build
cache (a fresh GOCACHE per run; modules downloaded beforehand, untimed), once one after
the other and once at the same time. `--pair ours` builds this repository's two binaries
instead (pvchaos-csi and the test provisioner: minutes, not a quarter of an hour). The load
average is printed with each figure: a busy machine moves them.

    .venv/bin/python -m bench.build_concurrency [--runs 1] [--pair sidecars|ours]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pvchaos.tools.build import PROVISIONER_SRC, _go_env, _require_go
from pvchaos.tools.csi_driver import CSI_DRIVER_SRC
from pvchaos.tools.csi_sidecars import SIDECARS, writable_source

Build = tuple[str, Path, str]  # (name, module directory, package)


def _build(go: str, work: Path, command: str, out: Path, gocache: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out), command], cwd=work,
                            env=_go_env({"GOCACHE": str(gocache)}), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def one_mode(go: str, builds: list[Build], tmp: Path, concurrent: bool) -> float:
    """Seconds to build every binary from an empty build cache, at once or in turn."""
    gocache = Path(tempfile.mkdtemp(prefix="gocache-", dir=tmp))
    started = time.monotonic()
    procs: list[subprocess.Popen[bytes]] = []
    for name, work, package in builds:
        proc = _build(go, work, package, tmp / name, gocache)
        if concurrent:
            procs.append(proc)
        elif proc.wait() != 0:
            raise SystemExit(f"bench.build_concurrency: building {name} failed")
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("bench.build_concurrency: a concurrent build failed")
    elapsed = time.monotonic() - started
    subprocess.run(["rm", "-rf", str(gocache)], check=False)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.build_concurrency", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--pair", choices=("sidecars", "ours"), default="sidecars")
    args = p.parse_args(argv)
    if args.runs < 1:
        print("bench.build_concurrency: --runs must be at least 1", file=sys.stderr)
        return 2
    go = _require_go()
    with tempfile.TemporaryDirectory(prefix="pvchaos-bench-build-") as tmp_name:
        tmp = Path(tmp_name)
        builds: list[Build] = ([(s.name, writable_source(s, tmp / f"src-{s.name}"), s.command) for s in SIDECARS]
                               if args.pair == "sidecars" else
                               [("pvchaos-csi", CSI_DRIVER_SRC, "."), ("pvchaos-provisioner", PROVISIONER_SRC, ".")])
        for _, work, _ in builds:  # modules into the shared module cache: the network is not what is measured
            subprocess.run([go, "mod", "download"], cwd=work, env=_go_env(), check=True)
        times: dict[str, list[float]] = {"one after the other": [], "at the same time": []}
        for run in range(args.runs):
            for concurrent in ((False, True) if run % 2 == 0 else (True, False)):
                mode = "at the same time" if concurrent else "one after the other"
                seconds = one_mode(go, builds, tmp, concurrent)
                times[mode].append(seconds)
                print(f"run {run + 1}: {mode}: {seconds:.0f} s (load average {os.getloadavg()[0]:.1f}, "
                      f"{os.cpu_count()} cores)", flush=True)
    seq, con = (statistics.median(v) for v in times.values())
    print(f"\n{' + '.join(name for name, _, _ in builds)} from an empty build cache, median of {args.runs}: "
          f"one after the other {seq:.0f} s, at the same time {con:.0f} s ({(seq - con) / seq:+.0%} saved)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
