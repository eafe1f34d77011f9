"""Adding a backend is a new package plus one registry line (docs/architecture.md,
"Adding a backend"): this test follows those steps with a trivial backend, registered
at run time instead of in `_BUILT_IN`, and checks every place that takes a backend name
selects it, without any other file knowing its name."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from pvchaos import cli, runner
from pvchaos.clusters import providers
from pvchaos.clusters.backend import Capability, ClusterHandle
from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.options import Options, check_options
from pvchaos.clusters.pool import CannotProvide, ClusterDefaults, ClusterPool, ClusterRequest
from pvchaos.clusters.provider import Feature, ProvideHooks, Provider, Teardown
from pvchaos.clusters.storage import HarnessStorage


class TrivialProvider:
    """Step 1: the backend's one object (in a package of its own: pvchaos/clusters/<name>/)."""

    name = "trivial"
    features = frozenset({Feature.STARTS_CLUSTERS})

    def __init__(self) -> None:
        self.downed: list[str] = []
        self.prepared = 0

    def problem(self, options: Options) -> str | None:
        return None if options.context != "refuse" else "backend trivial: refused"

    def prepare(self, options: Options) -> Teardown | None:
        self.prepared += 1
        return None

    def connect(self, options: Options, defaults: ClusterDefaults | None = None,
                hooks: ProvideHooks | None = None) -> tuple[ClusterHandle, Teardown | None]:
        handle = ClusterHandle(name="t", backend=self.name, kubeconfig=Path("/nonexistent"), context=None,
                               k8s_version="v1.35.4", capabilities=frozenset({Capability.ZONES}))
        return handle, lambda: self.downed.append(handle.name)

    def cluster_up(self, args: argparse.Namespace) -> ClusterHandle:
        return self.connect(Options())[0]

    def cluster_down(self, name: str | None) -> list[str]:
        return [f"removed trivial cluster {name}"]

    def cluster_list(self) -> list[str]:
        return ["t\ttrivial"]


@pytest.fixture
def trivial() -> Iterator[TrivialProvider]:
    backend = TrivialProvider()
    providers.register(backend)  # step 2: one line (in providers._BUILT_IN for a built-in backend)
    try:
        yield backend
    finally:
        providers.unregister(backend.name)


def test_the_trivial_backend_is_a_provider() -> None:
    backend: Provider = TrivialProvider()  # mypy checks the protocol where this file is type-checked
    assert backend.name == "trivial"


def test_it_is_selectable_everywhere_a_backend_is_named(trivial: TrivialProvider,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert "trivial" in providers.names()
    assert providers.provider("trivial") is trivial
    check_options(Options(backend="trivial"))  # --backend trivial is accepted
    check_options(Options(backend="local,trivial"))
    assert runner.backends_of("local,trivial") == ["local", "trivial"]
    assert runner.effective_workers(Options(backend="trivial", workers="auto")) == 1  # one cluster per run

    pool = ClusterPool(Options(backend="trivial"))
    handle = pool.shared(ClusterRequest())
    assert handle.backend == "trivial" and pool.capabilities(ClusterRequest()) == {Capability.ZONES}
    with pytest.raises(CannotProvide, match="backend trivial: cannot start a cluster"):
        pool.shared(ClusterRequest(nodes_per_zone=4))
    pool.close()
    assert trivial.downed == ["t"]

    assert cli.main(["cluster", "down", "--backend", "trivial", "--name", "x"]) == 0
    assert cli.main(["cluster", "list"]) == 0
    out = capsys.readouterr().out
    assert "removed trivial cluster x" in out and "t\ttrivial" in out


def test_its_refusal_is_one_line_before_anything_runs(trivial: TrivialProvider, tmp_path: Path) -> None:
    with pytest.raises(runner.UsageError, match="backend trivial: refused"):
        runner.validate(Options(backend="trivial", context="refuse", report_dir=tmp_path / "r"))


def test_an_unknown_or_taken_name_is_refused(trivial: TrivialProvider) -> None:
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        providers.provider("nope")
    with pytest.raises(ValueError, match="already registered"):
        providers.register(TrivialProvider())
    with pytest.raises(ValueError, match="built in"):
        providers.unregister("local")
    with pytest.raises(ValueError):
        check_options(Options(backend="nope"))


def test_features_are_declared_not_inferred_from_names() -> None:
    assert providers.names(Feature.CLUSTER_PER_REQUEST) == ("local",)
    assert providers.names(Feature.STARTS_CLUSTERS) == ("local", "kind")
    assert not providers.has("existing", Feature.HOST_PROCESSES) and not providers.has("nope", Feature.HOST_PROCESSES)


class ShapedBackend(TrivialProvider):
    """A backend that starts a cluster per shape (as kind does)."""

    name = "shaped"
    features = frozenset({Feature.SHAPED_CLUSTERS})

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, int, str]] = []
        self.stacks: list[CsiOptions] = []

    def connect(self, options: Options, defaults: ClusterDefaults | None = None,
                hooks: ProvideHooks | None = None) -> tuple[ClusterHandle, Teardown | None]:
        assert defaults is not None
        return self.provide(options, ClusterRequest(), defaults, ProvideHooks())

    def capabilities(self, request: ClusterRequest, defaults: ClusterDefaults, hooks: ProvideHooks) -> frozenset[str]:
        if request.disabled_controllers:  # as kind refuses what it cannot start
            raise CannotProvide(f"backend {self.name}: cannot start a cluster with {request.describe()}")
        return frozenset()

    def missing_details(self, request: ClusterRequest, defaults: ClusterDefaults,
                        hooks: ProvideHooks) -> dict[str, str]:
        return {}

    def provide(self, options: Options, request: ClusterRequest, defaults: ClusterDefaults,
                hooks: ProvideHooks) -> tuple[ClusterHandle, Teardown | None]:
        self.capabilities(request, defaults, hooks)
        topology = defaults.topology
        gates = {**defaults.feature_gates, **dict(request.feature_gates)}
        self.asked.append((",".join(request.zones or topology.zones), request.nodes_per_zone or topology.nodes_per_zone,
                           ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))))
        storage = request.storage(defaults)
        assert isinstance(storage, HarnessStorage)
        self.stacks.append(storage.csi)
        name = f"c{len(self.asked)}"
        handle = ClusterHandle(name=name, backend=self.name, kubeconfig=Path("/nonexistent"), context=None,
                               k8s_version="v1.35.4", capabilities=frozenset())
        return handle, lambda: self.downed.append(name)


def test_a_shaped_backend_starts_the_cluster_a_request_asks_for() -> None:
    backend = ShapedBackend()
    providers.register(backend)
    try:
        pool = ClusterPool(Options(backend="shaped", feature_gates="A=true"))
        assert pool.shared(ClusterRequest()).name == "c1"
        gate_off = ClusterRequest(feature_gates=(("MutablePVNodeAffinity", False),))
        assert pool.shared(gate_off).name == "c2" and pool.fresh(gate_off) == (pool.shared(gate_off), None)
        wide = ClusterRequest(zones=("zone-a", "zone-b"), nodes_per_zone=4)
        assert pool.shared(wide).name == "c3" and backend.downed == ["c2"]  # one shaped cluster at a time
        assert backend.asked == [("zone-a,zone-b,zone-c", 2, "A=true"),
                                 ("zone-a,zone-b,zone-c", 2, "A=true,MutablePVNodeAffinity=false"),
                                 ("zone-a,zone-b", 4, "A=true")]
        capacity = ClusterRequest(csi_capacity_tracking=True, csi_capacity_poll_seconds=30)
        assert pool.shared(capacity).name == "c4" and backend.downed == ["c2", "c3"]
        assert backend.stacks[-1] == CsiOptions(capacity_tracking=True, capacity_poll_seconds=30)
        assert backend.stacks[:3] == [CsiOptions()] * 3
        with pytest.raises(CannotProvide, match="cannot start a cluster with disabled_controllers"):
            pool.shared(ClusterRequest(nodes_per_zone=4, disabled_controllers=("ttl",)))
        pool.close()
        assert sorted(backend.downed) == ["c1", "c2", "c3", "c4"]
    finally:
        providers.unregister("shaped")


class ExplainingBackend(ShapedBackend):
    """A shaped backend that can say why its clusters lack attach (kind with a vendor's
    package whose CSIDriver sets attachRequired false)."""

    name = "explaining"

    def missing_details(self, request: ClusterRequest, defaults: ClusterDefaults,
                        hooks: ProvideHooks) -> dict[str, str]:
        return {"attach": "driver d's CSIDriver sets attachRequired false"}


def test_the_run_s_own_cluster_gets_the_backend_s_reasons_too() -> None:
    """certify's cluster is the default request of a backend that starts none per request:
    its skips named "backend kind: no attach" without the CSIDriver field that decides it."""
    backend = ExplainingBackend()
    providers.register(backend)
    try:
        pool = ClusterPool(Options(backend="explaining"))
        assert pool.missing_details(ClusterRequest()) == {"attach": "driver d's CSIDriver sets attachRequired false"}
        assert pool.missing_details(ClusterRequest(nodes_per_zone=4)) == pool.missing_details(ClusterRequest())
    finally:
        providers.unregister("explaining")
    assert ClusterPool(Options(backend="existing")).missing_details(ClusterRequest()) == {}


def test_kind_declares_shaped_clusters() -> None:
    assert providers.names(Feature.SHAPED_CLUSTERS) == ("kind",)


def test_down_all_with_nothing_to_remove_says_so_and_where_it_looked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Silence read as "all removed" while a run with another state directory kept its cluster."""
    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(providers, "names", lambda feature: ("local",))
    assert cli.main(["cluster", "down", "--all"]) == 0
    assert f"no clusters to remove under {tmp_path / 'state'}" in capsys.readouterr().out
