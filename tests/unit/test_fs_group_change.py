"""The fsGroupChangePolicy oracle against the kubelet's own rules (volume_linux.go)."""

from __future__ import annotations

import pytest

from pvchaos.conformance.fs_group_change import root_needs_change, walks_the_volume

G = 2345


@pytest.mark.parametrize("policy", [None, "Always"])
def test_always_walks_whatever_the_root(policy: str | None) -> None:
    assert walks_the_volume(policy, G, 0o2775, G)


@pytest.mark.parametrize("gid,mode,readonly,walks", [
    (G, 0o2775, False, False),  # what a walk leaves: group, rwx for the group, setgid
    (G, 0o2770, False, False),
    (G, 0o775, False, True),    # no setgid
    (G, 0o2755, False, True),   # the group cannot write
    (G, 0o2755, True, False),   # ...which a read-only mount does not need
    (G, 0o2664, False, True),   # no execute for the group
    (0, 0o2775, False, True),   # another group
])
def test_on_root_mismatch_walks_only_a_root_that_differs(gid: int, mode: int, readonly: bool, walks: bool) -> None:
    assert walks_the_volume("OnRootMismatch", gid, mode, G, readonly) is walks
    assert root_needs_change(gid, mode, G, readonly) is walks
