"""Every fault one shape (STYLE 15, Chaos Mesh's Apply/Recover): an injector takes the
workspace (its cleanup stack, cluster and client: anything with those three, `Target`),
registers its undo first (STYLE 5), injects, and returns a `Fault`. The caller holds the
handle: `restore()` runs exactly that undo once and takes it off the cleanup stack, so
the teardown does not run it again; a fault never restored is undone at teardown.
A fault on several targets (a zone outage) has one part per target, each restorable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube

__all__ = ["Fault", "Target", "apply", "combine", "register"]


class Target(Protocol):
    """What an injector works on: the test's workspace (pvchaos.kit.workspace.Workspace)."""

    @property
    def cleanup(self) -> Cleanup: ...
    @property
    def cluster(self) -> ClusterHandle: ...
    @property
    def kube(self) -> Kube: ...


@dataclass(eq=False)  # its own identity is its key on the cleanup stack
class Fault:
    """A fault in place: what was done, to what, and how to undo exactly that."""

    what: str
    touched: tuple[str, ...]
    _undo: Callable[[], Any] = field(repr=False)
    _cleanup: Cleanup | None = field(default=None, repr=False)
    parts: tuple[Fault, ...] = ()
    restored: bool = False

    def restore(self) -> None:
        """Recover: run the undo (each part's, for a fault on several targets) once and
        remove it from the cleanup stack. A second call does nothing. When the undo
        fails it stays on the stack, so the teardown tries again."""
        if self.restored:
            return
        self._undo()
        self.restored = True
        if self._cleanup is not None:
            self._cleanup.discard(self)

    def _undo_at_teardown(self) -> None:
        if not self.restored:
            self._undo()
            self.restored = True


def register(cleanup: Cleanup, what: str, touched: Iterable[str], undo: Callable[[], Any],
             undo_what: str) -> Fault:
    """The handle of a fault about to be injected, its undo (named `undo_what`) already
    on the stack: for injectors that act on several targets at one instant."""
    fault = Fault(what, tuple(touched), undo, cleanup)
    cleanup.push(undo_what, fault._undo_at_teardown, key=fault)
    return fault


def apply(cleanup: Cleanup, what: str, touched: Iterable[str], inject: Callable[[], Any],
          undo: Callable[[], Any], undo_what: str) -> Fault:
    """Register `undo` (named `undo_what` on the stack), then `inject`; the handle."""
    fault = register(cleanup, what, touched, undo, undo_what)
    inject()
    return fault


def combine(what: str, parts: Iterable[Fault]) -> Fault:
    """One handle for faults on several targets, each still restorable on its own."""
    parts = tuple(parts)

    def undo() -> None:
        errors = []
        for part in reversed(parts):
            try:
                part.restore()
            except Exception as exc:  # noqa: BLE001 - every part is tried, failures raised together
                errors.append(exc)
        if errors:
            raise ExceptionGroup(f"restore {what}: {len(errors)} part(s) failed", errors)

    return Fault(what, tuple(t for p in parts for t in p.touched), undo, None, parts)
