"""`kube.builders.provisioning_failures` writes exactly the keys and words the Go
provisioner reads (pvchaos/tools/provisioner/knob.go), so a suite cannot ask for a failure the
provisioner would refuse as an unknown parameter."""

from __future__ import annotations

import re

import pytest

from pvchaos.kube import builders as b
from pvchaos.tools.build import PROVISIONER_SRC

KNOB_GO = (PROVISIONER_SRC / "knob.go").read_text()


def _go_keys() -> set[str]:
    suffixes = re.findall(r'key\w+\s*=\s*knobPrefix \+ "([a-z-]+)"', KNOB_GO)
    return {f"pvchaos.dev/{s}" for s in suffixes}


def _go_actions() -> set[str]:
    block = KNOB_GO.split("var actions =", 1)[1].split("}", 1)[0]
    return set(re.findall(r'"([a-z-]+)":', block))


def test_every_parameter_is_one_the_provisioner_knows() -> None:
    params = b.provisioning_failures(times=1, nodes=("n1", "n2"), zones=("zone-a",), first_node=True,
                                     action="finished", reason="disk full", delay="200ms")
    assert set(params) == _go_keys()
    assert params == {
        "pvchaos.dev/fail-times": "1", "pvchaos.dev/fail-nodes": "n1,n2", "pvchaos.dev/fail-zones": "zone-a",
        "pvchaos.dev/fail-first-node": "true", "pvchaos.dev/fail-action": "finished",
        "pvchaos.dev/fail-reason": "disk full", "pvchaos.dev/fail-delay": "200ms",
    }


def test_actions_are_the_provisioners() -> None:
    assert set(b.FAIL_ACTIONS) == _go_actions()


def test_defaults_fail_every_attempt_and_reschedule() -> None:
    assert b.provisioning_failures() == {"pvchaos.dev/fail-action": "reschedule"}


@pytest.mark.parametrize("kwargs", [{"action": "explode"}, {"times": -1}])
def test_bad_values_are_refused_before_a_class_is_made(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        b.provisioning_failures(**kwargs)
