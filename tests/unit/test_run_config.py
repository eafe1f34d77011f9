"""Options resolved once (pvchaos/run_config.py): one function parses and validates the
topology, gates, version, profile and scale shape into the typed RunConfig."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pvchaos.clusters.options import Options
from pvchaos.run_config import resolve
from pvchaos.tools.versions import DEFAULT_K8S_VERSION
from tests.unit.package_fixtures import image_archive


def test_defaults_are_resolved() -> None:
    config = resolve(Options())
    assert config.topology.zones == ("zone-a", "zone-b", "zone-c") and config.topology.nodes_per_zone == 2
    assert config.k8s_version == DEFAULT_K8S_VERSION and config.minor > 0
    assert config.feature_gates == {} and config.profile is None and config.scale_shape is None
    assert config.backend == "local"


def test_each_option_is_parsed_once_into_its_type() -> None:
    config = resolve(Options(zones="east,west", nodes_per_zone=3, feature_gates="A=true,B=false",
                             k8s_version="v1.34.4", scale=True, scale_size="10x20"))
    assert config.topology.zones == ("east", "west") and config.topology.node_count == 6
    assert config.feature_gates == {"A": True, "B": False} and config.minor == 34
    assert config.scale_shape is not None and config.scale_shape.nodes == 10


@pytest.mark.parametrize(("options", "needle"), [
    (Options(feature_gates="A=maybe"), "is not NAME=true|false"),
    (Options(k8s_version="v1.35"), "not a Kubernetes release version"),
    (Options(scale=True, scale_size="lots"), "--scale-size lots"),
])
def test_bad_input_is_one_value_error(options: Options, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        resolve(options)


def test_the_pool_starts_clusters_from_the_resolved_configuration_not_the_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool takes the run's topology, gates and version from RunConfig; it does not
    parse the option strings again (issue 22: options resolved once)."""
    from pvchaos.clusters import request as request_module
    from pvchaos.clusters.pool import ClusterPool, ClusterRequest

    resolved = resolve(Options(zones="a,b", nodes_per_zone=2, feature_gates="MutablePVNodeAffinity=false"))

    def no_parsing(*_: object) -> dict[str, bool]:
        raise AssertionError("the pool parsed the feature gates again")

    monkeypatch.setattr(request_module, "parse_feature_gates", no_parsing)
    pool = ClusterPool(resolved.options, defaults=resolved.cluster_defaults)
    cfg = _config_for(pool, ClusterRequest(feature_gates=(("CSIVolumeHealth", True),)))
    assert cfg.topology.zones == ("a", "b") and cfg.topology.nodes_per_zone == 2
    assert cfg.feature_gates.get("MutablePVNodeAffinity") is False and cfg.feature_gates.get("CSIVolumeHealth") is True
    assert cfg.k8s_version == DEFAULT_K8S_VERSION


def _config_for(pool, request):  # type: ignore[no-untyped-def]
    """The local cluster configuration the pool's provider makes for a request."""
    from pvchaos.clusters.local.provider import PROVIDER
    return PROVIDER.config_for(request, pool.defaults, pool.hooks)



def test_a_package_brings_its_own_profile_unless_the_run_names_one(tmp_path: Path) -> None:
    """`run --driver-package DIR` without --profile reads DIR's profile: the tests' classes
    are then the package's (parameters too), not a bare provisioner name."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    package = tmp_path / "pkg"
    package.mkdir()
    for f in (examples / "vendor-node-local").glob("*.yaml"):
        shutil.copy(f, package / f.name)
    image_archive(package / "images" / "all.tar", ["pvchaos.dev/vendor/pvchaos-csi:0.1.0",
                                                   "pvchaos.dev/vendor/csi-provisioner:v6.4.0"])
    config = resolve(Options(driver_package=str(package)))
    assert config.profile is not None and config.profile.name == "local.vendor.example.com"
    named = resolve(Options(driver_package=str(package), profile=str(examples / "vendor-driver" / "profile.yaml")))
    assert named.profile is not None and named.profile.name == "vendor.csi.pvchaos.dev"
