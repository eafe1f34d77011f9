"""Work that runs beside a disruption: a stream of new pods with claims, and a watcher
that checks stability and the invariants over and over.

Both run in threads with clients of their own (the test's client stays the test's), and
both tolerate the API server being away: an upgrade restarts it. What they saw is
returned when they stop, so the test asserts on it in its own thread.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pvchaos.conformance import invariants, stability
from pvchaos.kube import builders as b
from pvchaos.kube import kinds, snapshot
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect


@dataclass
class Arrivals:
    """Pods, each with its own claim of `storage_class`, created every `every` seconds."""

    kubeconfig: Path
    namespace: str
    storage_class: str
    labels: dict[str, str]
    every: float = 0.7
    prefix: str = "arrival"
    created: list[str] = field(default_factory=list)  # pod names; each claim is named the same
    refused: int = 0  # creations the API server did not answer (it was restarting), retried
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Arrivals:
        self._thread = threading.Thread(target=self._run, name=f"{self.prefix}-creator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[str]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return list(self.created)

    def _run(self) -> None:
        kube = connect(self.kubeconfig, timeout=3.0)
        try:
            while not self._stop.is_set():
                name = f"{self.prefix}-{len(self.created)}"
                try:
                    self._create(kube, name)
                    self.created.append(name)
                except Exception:  # noqa: BLE001 - the API server is away during its restart: retry
                    self.refused += 1
                self._stop.wait(self.every)
        finally:
            kube.api.close()

    def _create(self, kube: Kube, name: str) -> None:
        labels = dict(self.labels)
        if kinds.get(kube, "PersistentVolumeClaim", name, self.namespace) is None:  # a retry after a lost answer
            kinds.create(kube, b.persistent_volume_claim(name, "1Gi", self.storage_class, labels=labels),
                         self.namespace)
        if kinds.get(kube, "Pod", name, self.namespace) is None:
            kinds.create(kube, b.pod(name, (name,), labels=labels), self.namespace)


@dataclass
class Watch:
    """Snapshots every `every` seconds: each departure from the baseline and each
    invariant violation is recorded once, with the seconds since the watch started."""

    kubeconfig: Path
    base: stability.Baseline
    exempt_pods: set[str] = field(default_factory=set)
    every: float = 0.3
    seen: dict[str, float] = field(default_factory=dict)  # problem -> first seen (s)
    nodes_not_ready: dict[str, float] = field(default_factory=dict)  # node -> first seen not Ready or tainted (s)
    snapshots: int = 0
    unreachable: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _started: float = 0.0

    def start(self) -> Watch:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="stability-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return dict(self.seen)

    def check_now(self, kube: Kube) -> list[str]:
        """One round: problems in the current state (also recorded)."""
        snap = snapshot.take(kube)
        self.snapshots += 1
        self.base = stability.with_new_bindings(self.base, snap)
        problems = stability.disturbances(self.base, snap)
        problems += [f"invariant {v}" for v in invariants.check(snap, self.exempt_pods)]
        now = round(time.monotonic() - self._started, 2)
        for p in problems:
            self.seen.setdefault(p, now)
        for node in snap.nodes:  # observed, not judged: a restart longer than the grace period shows here
            if o.ready(node) != "True" or o.has_taint(node, o.UNREACHABLE) or o.has_taint(node, o.NOT_READY):
                self.nodes_not_ready.setdefault(o.name(node), now)
        return problems

    def _run(self) -> None:
        kube = connect(self.kubeconfig, timeout=3.0)
        try:
            while not self._stop.is_set():
                try:
                    self.check_now(kube)
                except Exception:  # noqa: BLE001 - the API server is away during its restart
                    self.unreachable += 1
                self._stop.wait(self.every)
        finally:
            kube.api.close()
