"""Hands each pytest worker its clusters, and takes them all down at the end: the policy
on top of the backends, which each provide a cluster for a request (clusters/provider.py).

Isolation model (docs/isolation.md):
- non-disruptive tests share one cluster per worker; each test has its own namespace
  and uniquely named cluster-scoped objects;
- a test that needs a differently configured cluster (gate off, a controller or plugin
  disabled, another shape or CSI stack setting) gets one per worker per configuration,
  shared with tests asking the same;
- a disruptive test (node or zone faults, node label changes, component restarts) gets
  a fresh cluster of its own, destroyed right after it. Local clusters start in a few
  seconds, so this costs less than coordinating faults between tests.
Backends without the `cluster-per-request` feature (today existing and kind) have one
cluster per run, reached through their provider's `connect`. A backend with the
`shaped-clusters` feature (kind) also provides, one at a time, a cluster for a request
beyond the defaults; on other backends (existing) such a request skips with the reason.
The storage stack is part of every request: pvchaos-csi, or the run's vendor package.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pvchaos.clusters import providers
from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.clusters.options import Options
from pvchaos.clusters.provider import Feature, ProvideHooks, Provider, ShapedProvider, Teardown
from pvchaos.clusters.request import SHAPE_FIELDS, CannotProvide, ClusterDefaults, ClusterRequest

__all__ = ["SHAPE_FIELDS", "CannotProvide", "ClusterDefaults", "ClusterPool", "ClusterRequest", "Teardown"]


@dataclass
class ClusterPool:
    """The clusters of one worker process."""

    options: Options
    hooks: ProvideHooks = field(default_factory=ProvideHooks)
    defaults: ClusterDefaults | None = None  # None: parsed from `options` (ClusterDefaults.parse)
    _shared: dict[ClusterRequest, tuple[ClusterHandle, Teardown | None]] = field(default_factory=dict)
    _external: ClusterHandle | None = None
    _external_down: Teardown | None = None  # set when the harness created the cluster (kind)
    _shaped: tuple[ClusterRequest, ClusterHandle, Teardown | None] | None = None  # kind: the cluster of a shape

    def __post_init__(self) -> None:
        if self.defaults is None:
            self.defaults = ClusterDefaults.parse(self.options)

    @property
    def _defaults(self) -> ClusterDefaults:
        assert self.defaults is not None  # set in __post_init__
        return self.defaults

    @property
    def _provider(self) -> Provider:
        try:
            return providers.provider(self.options.backend)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None

    @property
    def per_request(self) -> bool:
        """The backend starts a cluster per request (the local backend)."""
        return providers.has(self.options.backend, Feature.CLUSTER_PER_REQUEST)

    def _shaper(self, request: ClusterRequest) -> ShapedProvider:
        """The provider, for a request it must start a cluster for; CannotProvide where it
        starts none."""
        backend = self._provider
        if self.per_request or Feature.SHAPED_CLUSTERS in backend.features:
            if not isinstance(backend, ShapedProvider):
                raise ClusterError(f"backend {backend.name}: declares a cluster per request but has no provide()")
            return backend
        raise CannotProvide(f"backend {backend.name}: cannot start a cluster with {request.describe()}")

    def capabilities(self, request: ClusterRequest) -> frozenset[str]:
        """What the cluster for this request can do, without starting a new one (CannotProvide
        where no such cluster can be had)."""
        if request in self._shared:
            return self._shared[request][0].capabilities
        if not self.per_request and request.is_default:
            return self._external_cluster().capabilities
        return self._shaper(request).capabilities(request, self._defaults, self.hooks)

    def missing_details(self, request: ClusterRequest) -> dict[str, str]:
        """Capability -> why this request's cluster lacks it, where the backend can say. A
        backend that shapes clusters says it for the run's own cluster too (certify's kind
        cluster: "its CSIDriver sets attachRequired false", not a bare "backend kind: no
        attach"); one that starts none (existing) has nothing to add."""
        try:
            return self._shaper(request).missing_details(request, self._defaults, self.hooks)
        except CannotProvide:
            return {}

    def _provide(self, request: ClusterRequest) -> tuple[ClusterHandle, Teardown | None]:
        return self._shaper(request).provide(self.options, request, self._defaults, self.hooks)

    def shared(self, request: ClusterRequest) -> ClusterHandle:
        """The worker's cluster for this configuration, started on first use."""
        if not self.per_request:
            return self._external_cluster() if request.is_default else self._shaped_for(request)
        if request not in self._shared:
            self._shared[request] = self._provide(request)
        return self._shared[request][0]

    def fresh(self, request: ClusterRequest) -> tuple[ClusterHandle, Teardown | None]:
        """A cluster for one disruptive test and how to down it (None: not ours to down)."""
        if not self.per_request:
            return self.shared(request), None
        return self._provide(request)

    # -- one cluster per run ----------------------------------------------------------------
    def _external_cluster(self) -> ClusterHandle:
        if self._external is None:
            self._external, self._external_down = self._provider.connect(self.options, self._defaults, self.hooks)
        return self._external

    def _shaped_for(self, request: ClusterRequest) -> ClusterHandle:
        """A cluster for a request beyond the defaults, from a backend that starts one per
        request (kind: `shaped-clusters`); one at a time, beside the run's own."""
        if self._shaped is not None and self._shaped[0] == request:
            return self._shaped[1]
        shaper = self._shaper(request)
        shaper.capabilities(request, self._defaults, self.hooks)  # CannotProvide before the current one is downed
        self._down_shaped()
        handle, down = shaper.provide(self.options, request, self._defaults, self.hooks)
        self._shaped = (request, handle, down)
        return handle

    def _down_shaped(self) -> None:
        if self._shaped is None:
            return
        _, handle, down = self._shaped
        self._shaped = None
        self._down(handle, down)

    def _down(self, handle: ClusterHandle, down: Teardown | None) -> None:
        if down is None:
            return
        if self.options.keep_cluster:
            print(f"[pvchaos] kept cluster {handle.name}: export KUBECONFIG={handle.kubeconfig}")
            return
        down()

    def close(self) -> None:
        """Down every cluster this worker started (unless --keep-cluster)."""
        errors = []
        while self._shared:
            _, (handle, down) = self._shared.popitem()
            try:
                self._down(handle, down)
            except Exception as exc:  # noqa: BLE001 - gathered below
                errors.append(exc)
        try:
            self._down_shaped()
        except Exception as exc:  # noqa: BLE001 - gathered below
            errors.append(exc)
        if self._external is not None:
            handle, down = self._external, self._external_down
            self._external, self._external_down = None, None
            try:
                self._down(handle, down)
            except Exception as exc:  # noqa: BLE001 - gathered below
                errors.append(exc)
        if errors:
            raise ExceptionGroup("cluster teardown failed", errors)
