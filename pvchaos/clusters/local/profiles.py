"""CPU profiles of a local cluster's Go control plane while something runs.

How a storm's bottleneck is found rather than guessed (bench.storm --profile): the
cluster must run with `LocalClusterConfig.profiling`, which serves /debug/pprof on
kube-apiserver (admin token) and, without credentials on loopback, on the
controller-manager and the scheduler. Profiles are taken back to back, all three at
once, until the block ends; `summaries()` merges each component's profiles and writes
`go tool pprof -top -cum` of them next to the raw files.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from pvchaos.clusters.local.cluster import COMPONENT_PORT, admin_token
from pvchaos.clusters.local.loopback_http import get_bytes
from pvchaos.clusters.local.registry import ClusterState


class CpuProfiles:
    """Back-to-back CPU profiles of every Go control-plane component, as a context manager."""

    def __init__(self, cluster_dir: Path, out: Path, seconds: int = 15):
        self.out, self.seconds = out, seconds
        state = ClusterState.load(cluster_dir)
        self.urls = {c: f"https://127.0.0.1:{state.ports[p]}/debug/pprof/profile?seconds={seconds}"
                     for c, p in COMPONENT_PORT.items()}
        self.token = admin_token(cluster_dir)
        self.files: dict[str, list[Path]] = {c: [] for c in COMPONENT_PORT}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-profiles", daemon=True)

    def _one(self, component: str, index: int) -> None:
        token = self.token if component == "kube-apiserver" else None
        status, body = get_bytes(self.urls[component], token, timeout=self.seconds + 30)
        if status != 200:
            self.errors.append(f"{component}: GET {self.urls[component]} answered {status}: {body[:200]!r}")
            return
        path = self.out / f"{component}-{index}.pprof"
        path.write_bytes(body)
        self.files[component].append(path)

    def _run(self) -> None:
        index = 0
        with ThreadPoolExecutor(max_workers=len(COMPONENT_PORT)) as pool:
            while not self._stop.is_set() and len(self.errors) < 3:
                list(pool.map(partial(self._one, index=index), COMPONENT_PORT))
                index += 1

    def __enter__(self) -> CpuProfiles:
        self.out.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.seconds + 35)

    def summaries(self) -> list[str]:
        """One line per component: where its merged top-by-cumulative listing is."""
        go = shutil.which("go")
        lines = [f"profile error: {e}" for e in self.errors]
        for component, files in self.files.items():
            if not files:
                continue
            if go is None:
                lines.append(f"{component}: {len(files)} profiles in {self.out} (no `go` to summarise them)")
                continue
            top = self.out / f"{component}.top.txt"
            run = subprocess.run([go, "tool", "pprof", "-top", "-cum", "-nodecount=60", *map(str, files)],
                                 capture_output=True, text=True, timeout=120, check=False)
            top.write_text(run.stdout or run.stderr)
            lines.append(f"{component}: {len(files)} x {self.seconds}s CPU profiles, top by cumulative time in {top}")
        return lines
