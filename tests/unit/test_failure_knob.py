"""`kube.builders.provisioning_failures` writes exactly the keys and words the harness's
provisioners read: the CSI driver pvchaos-csi (CreateVolume parameters) and the old test
double (pvchaos/tools/provisioner/knob.go, which reads `fail-code` as upstream's
external-provisioner reads the gRPC code), so a suite cannot ask for a failure either
would refuse as an unknown parameter."""

from __future__ import annotations

import re

import pytest

from pvchaos.kube import builders as b
from pvchaos.tools.build import PROVISIONER_SRC
from pvchaos.tools.csi_driver import CSI_DRIVER_SRC

KNOB_GO = (PROVISIONER_SRC / "knob.go").read_text()
DRIVER_KNOB_GO = (CSI_DRIVER_SRC / "driver" / "knob.go").read_text()


def _go_keys() -> set[str]:
    suffixes = re.findall(r'key\w+\s*=\s*knobPrefix \+ "([a-z-]+)"', KNOB_GO)
    return {f"pvchaos.dev/{s}" for s in suffixes}


def _go_codes() -> set[str]:
    block = KNOB_GO.split("var codeActions =", 1)[1].split("\n}", 1)[0]
    return set(re.findall(r'"([A-Za-z]+)":', block))


def test_every_parameter_is_one_the_provisioners_know() -> None:
    params = b.provisioning_failures(times=1, nodes=("n1", "n2"), zones=("zone-a",), first_node=True,
                                     code="Internal", reason="disk full", delay="200ms")
    assert set(params) | {"pvchaos.dev/fail-action"} == _go_keys()
    assert params == {
        "pvchaos.dev/fail-times": "1", "pvchaos.dev/fail-nodes": "n1,n2", "pvchaos.dev/fail-zones": "zone-a",
        "pvchaos.dev/fail-first-node": "true", "pvchaos.dev/fail-code": "Internal",
        "pvchaos.dev/fail-reason": "disk full", "pvchaos.dev/fail-delay": "200ms",
    }


def test_every_parameter_is_one_the_csi_driver_knows() -> None:
    suffixes = re.findall(r'key\w+\s*=\s*knobPrefix \+ "([a-z-]+)"', DRIVER_KNOB_GO)
    driver_keys = {f"pvchaos.dev/fail-{s}" for s in suffixes}
    every = b.provisioning_failures(times=1, nodes=("n1",), zones=("z",), first_node=True, reason="r", delay="1s")
    assert set(every) | set(b.provisioning_failures(crash=True)) == driver_keys


def test_codes_are_grpc_names_the_double_maps() -> None:
    assert set(b.FAIL_CODES) == _go_codes()


def test_defaults_fail_every_attempt_with_resource_exhausted() -> None:
    assert b.provisioning_failures() == {"pvchaos.dev/fail-code": "ResourceExhausted"}


def test_crash_replaces_the_code() -> None:
    assert b.provisioning_failures(crash=True, times=1) == {"pvchaos.dev/fail-action": "crash",
                                                            "pvchaos.dev/fail-times": "1"}


@pytest.mark.parametrize("kwargs", [{"code": "explode"}, {"code": "reschedule"}, {"times": -1}])
def test_bad_values_are_refused_before_a_class_is_made(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        b.provisioning_failures(**kwargs)
