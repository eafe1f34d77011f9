"""The 0.1 call forms of the fault injectors, kept working through 0.2.

0.1 documented `set_node_labels(cleanup, kube, node, changes)` and
`fail_node(cleanup, cluster, node)`: the cleanup stack and the client or the cluster
handle first, and a plain return value (the previous labels, the node failed). 0.2 takes
the workspace and returns a `Fault` (chaos/fault.py). A suite written for 0.1 must not
break on the upgrade, so a call whose first argument (or `cleanup=` keyword) is a
`Cleanup` is the old form: it warns (DeprecationWarning, pointing at the caller's line),
runs the new injector on a `Target` made of the old arguments (the undo still goes on
that cleanup stack, before the fault) and returns what 0.1 returned. 0.3 drops it.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube

REMOVED_IN = "0.3"  # as pvchaos.moved: what 0.2 renamed or reshaped goes away in 0.3
F = TypeVar("F", bound=Callable[..., Any])


def returns_node(new: Callable[..., Any], ws: Any, node: str) -> str:
    """0.1's one-node faults returned the node."""
    new(ws, node)
    return node


def returns_touched(new: Callable[..., Any], ws: Any, *args: Any, **kwargs: Any) -> list[str]:
    """0.1's outages returned the nodes they failed; a `Fault` knows what it touched."""
    return list(new(ws, *args, **kwargs).touched)


def returns_nothing(new: Callable[..., Any], ws: Any, *args: Any, **kwargs: Any) -> None:
    new(ws, *args, **kwargs)


def returns_argument(new: Callable[..., Any], ws: Any, first: str, *args: Any, **kwargs: Any) -> str:
    """0.1's stop_component returned the name it was given."""
    new(ws, first, *args, **kwargs)
    return first


@dataclass(frozen=True)
class OldTarget:
    """A `Target` made of the old form's leading arguments. What the old form did not
    pass is never needed by the injector it served; asking for it anyway says so."""

    cleanup: Cleanup
    given_cluster: ClusterHandle | None = None
    given_kube: Kube | None = None
    injector: str = "?"

    @property
    def cluster(self) -> ClusterHandle:
        if self.given_cluster is None:
            raise TypeError(f"{self.injector}: the 0.1 call form passed no cluster; call it with the workspace")
        return self.given_cluster

    @property
    def kube(self) -> Kube:
        if self.given_kube is None:
            raise TypeError(f"{self.injector}: the 0.1 call form passed no client; call it with the workspace")
        return self.given_kube


def _is_old(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args) and isinstance(args[0], Cleanup) or isinstance(kwargs.get("cleanup"), Cleanup)


def old_form(lead: tuple[str, ...], old: Callable[..., Any]) -> Callable[[F], F]:
    """Accept the 0.1 form too. ``lead``: its leading parameters (``("cleanup", "kube")``,
    ``("cleanup", "cluster")``, ``("cleanup", "cluster", "kube")``), by position or by
    name; ``old(new, target, *rest, **kw)``: 0.1's behaviour and return value, built on
    ``new`` (the injector itself). Apply it above ``allure.step`` so the warning points
    at the caller's line."""
    def decorate(new: F) -> F:
        @functools.wraps(new)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            if not _is_old(args, kwargs):
                return new(*args, **kwargs)
            values = dict(zip(lead, args, strict=False))
            rest = args[len(lead):]
            for name in lead:
                if name in kwargs:
                    values[name] = kwargs.pop(name)
            missing = [name for name in lead if name not in values]
            if missing:
                raise TypeError(f"{new.__name__}(): the 0.1 call form lacks {', '.join(missing)}")
            warnings.warn(f"{new.__name__}({', '.join(lead)}, ...) is the 0.1 call form: call "
                          f"{new.__name__}(ws, ...) with the test's workspace, which returns a Fault to restore() "
                          f"(the old form goes away in pvchaos {REMOVED_IN})", DeprecationWarning, stacklevel=2)
            target = OldTarget(values["cleanup"], values.get("cluster"), values.get("kube"), new.__name__)
            return old(new, target, *rest, **kwargs)
        return cast(F, dispatch)
    return decorate
