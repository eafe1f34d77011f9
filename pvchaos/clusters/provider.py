"""One interface per backend (STYLE 13, kind's `providers/provider.go`).

Every backend (local, kind, existing) is a `Provider`: its name, the features it declares,
what input it refuses, what it prepares before a run, and how to reach the cluster of a run.
The registry (`pvchaos/clusters/providers.py`) maps names to providers and is the one place
a backend is chosen by its name; everything else asks the provider for a `Feature`.

Features are what the harness does differently per backend (how many clusters, what is
built before the run); what a *cluster* can do for a test stays a `Capability` on its
handle (clusters/backend.py), which suites ask for with `needs(...)`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pvchaos.clusters.backend import ClusterHandle

if TYPE_CHECKING:  # types only: options.py reads the registry for the backend names
    from pvchaos.clusters.options import Options
    from pvchaos.clusters.request import ClusterDefaults, ClusterRequest

__all__ = ["Feature", "Provider", "ProvideHooks", "ShapedProvider", "Teardown"]

Teardown = Callable[[], None]  # downs a cluster the harness started


def _same(config: Any) -> Any:
    return config


def _nothing(cluster: Any, handle: ClusterHandle) -> None:
    return None


@dataclass(frozen=True)
class ProvideHooks:
    """The run's last word on a cluster a backend starts (the plugin routes these to its
    hooks, pvchaos.plugin.hookspecs): `configure` takes and returns the backend's own
    configuration object (local: LocalClusterConfig), `started` is told of the cluster once
    it is up. Backends whose clusters have no such object ignore them."""

    configure: Callable[[Any], Any] = _same
    started: Callable[[Any, ClusterHandle], None] = _nothing


class Feature(StrEnum):
    """What a backend does, declared by its provider."""

    # The pool starts a cluster of its own for each cluster request (a gate off, a shape,
    # a disruptive test): tests never need to skip for the cluster they ask for, and
    # several workers each run their own clusters.
    CLUSTER_PER_REQUEST = "cluster-per-request"
    # Clusters are processes of this machine, built here per version: binaries are built
    # and gates checked against them before the run, orphans of killed runs swept, the
    # workers bounded by memory, the default version applies, several versions per run.
    HOST_PROCESSES = "host-processes"
    # Beside the run's one cluster, the backend starts a cluster of the zones, nodes per
    # zone, feature gates and storage stack a cluster request asks for (kind; its provider
    # is a ShapedProvider), where a backend with one cluster per run would skip the test.
    SHAPED_CLUSTERS = "shaped-clusters"
    # `pvchaos cluster up/down` start and remove clusters of this backend that outlive the command.
    STARTS_CLUSTERS = "starts-clusters"


class Provider(Protocol):
    """A backend. A new one is a package with an object of this shape, plus one line in
    `pvchaos/clusters/providers.py` (docs/architecture.md, "Adding a backend")."""

    name: str
    features: frozenset[Feature]

    def problem(self, options: Options) -> str | None:
        """Why this backend cannot run with these options (one line), or None."""
        ...

    def prepare(self, options: Options) -> Teardown | None:
        """Before any worker starts: build or start what the run needs; returns what to stop
        after the run, or None."""
        ...

    def connect(self, options: Options, defaults: ClusterDefaults,
                hooks: ProvideHooks | None = None) -> tuple[ClusterHandle, Teardown | None]:
        """The run's one cluster (the default request's) and how to down it (None: not the
        harness's to down), with the run's hooks where the backend starts it. The pool asks
        backends with CLUSTER_PER_REQUEST to `provide` one per request instead."""
        ...

    def cluster_up(self, args: argparse.Namespace) -> ClusterHandle:
        """`pvchaos cluster up --backend NAME`: a cluster that outlives the command."""
        ...

    def cluster_down(self, name: str | None) -> list[str]:
        """`pvchaos cluster down`: remove the cluster named (None: all of this backend's);
        one line per cluster removed; ClusterError when a named one is not there."""
        ...

    def cluster_list(self) -> list[str]:
        """`pvchaos cluster list`: one line per cluster of this backend."""
        ...


@runtime_checkable
class ShapedProvider(Protocol):
    """A backend that provides a cluster for a request (local: every request; kind: the
    requests beyond the run's own cluster). The storage stack is part of the request
    (`ClusterRequest.storage(defaults)`: pvchaos-csi as the request's CSI options say, or the
    run's vendor package), so a vendor's driver is installed in every cluster it starts."""

    def capabilities(self, request: ClusterRequest, defaults: ClusterDefaults, hooks: ProvideHooks) -> frozenset[str]:
        """What the cluster for this request can do, known before it starts; CannotProvide
        (clusters/request.py) with the reason where the backend cannot start such a cluster."""
        ...

    def missing_details(self, request: ClusterRequest, defaults: ClusterDefaults,
                        hooks: ProvideHooks) -> dict[str, str]:
        """Capability -> why this request's cluster lacks it, where the backend can say."""
        ...

    def provide(self, options: Options, request: ClusterRequest, defaults: ClusterDefaults,
                hooks: ProvideHooks) -> tuple[ClusterHandle, Teardown | None]:
        """A new cluster for this request and how to down it; CannotProvide as above."""
        ...
