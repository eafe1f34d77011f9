"""fsGroup on the driver's volumes (issues 35 and 37; upstream's fsgroupchangepolicy suite):
the kubelet gives a volume's root the pod's fsGroup as the CSIDriver's fsGroupPolicy says:
File always, None never, ReadWriteOnceWithFSType (the default) for a ReadWriteOnce volume
with an fsType; and with fsGroupChangePolicy OnRootMismatch it walks the volume only when
the root does not already look changed. The expectations are the pure oracle's
(volume_evidence.fs_group_applies, fs_group_change.walks_the_volume); the ownership is what
the pod itself reads, so any driver can be judged. pvchaos-csi runs with fsGroupPolicy File
unless a test asks for another (the csi_fs_group_policy cluster marker)."""

from __future__ import annotations

import allure
import pytest

from pvchaos.api import Workspace, b, kinds, o, x
from pvchaos.conformance.fs_group_change import ON_ROOT_MISMATCH, root_needs_change, walks_the_volume
from pvchaos.conformance.volume_evidence import fs_group_applies
from pvchaos.kube.poll import poll_until
from pvchaos.tools.nodeimage.recipe import TEST_IMAGE  # busybox, built into the kind node image

pytestmark = [allure.epic("Real kubelets"), allure.feature("fsGroup"),
              pytest.mark.needs("real-kubelet", "dynamic-zonal"), pytest.mark.exercises("fsgroup")]

FS_GROUP = 2345
OTHER_GROUP = 777  # what a root container gives one file by hand between two pods


def _policy(ws: Workspace) -> str | None:
    csidriver = kinds.get(ws.kube, "CSIDriver", ws.driver.name) or {}
    policy = (csidriver.get("spec") or {}).get("fsGroupPolicy")
    return str(policy) if policy else None


def _pod_prints(ws: Workspace, name: str, script: str, change_policy: str | None = None) -> list[str]:
    """A pod with fsGroup FS_GROUP (and the change policy) on claim `data` that runs
    `script` and sleeps; the words it printed, once it printed some."""
    pod = b.pod(name, ("data",))
    pod["spec"]["securityContext"] = {"fsGroup": FS_GROUP,
                                      **({"fsGroupChangePolicy": change_policy} if change_policy else {})}
    pod["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": ["sh", "-c", f"{script}; exec sleep 3600"]})
    ws.create(pod)
    x.pod_runs(ws, name, timeout=120)
    # a log cannot be watched: polled, bounded
    words: list[str] = poll_until(lambda: kinds.pod_log(ws.kube, name, ws.namespace).split() or None, 60,
                                  f"pod {name} printed what it read", interval=1.0)
    return words


def _fs_group_applies(ws: Workspace, policy: str | None) -> bool:
    pv = x.bound_volume(ws, "data")
    return fs_group_applies(policy, o.spec(pv).get("accessModes") or [], (o.spec(pv).get("csi") or {}).get("fsType"))


@allure.story("the volume root's group is the pod's fsGroup exactly when the driver's fsGroupPolicy says so")
@pytest.mark.parametrize("policy", [pytest.param("driver", marks=pytest.mark.quick), pytest.param("None", marks=[
    pytest.mark.cluster(csi_fs_group_policy="None"), pytest.mark.needs("pvchaos-csi-control")])])
def test_fs_group_follows_the_drivers_policy(ws: Workspace, policy: str) -> None:
    """`driver`: whatever the run's driver declares (pvchaos-csi: File); `None`: pvchaos-csi
    asked to run with fsGroupPolicy None, so the other answer is seen on a real kubelet too.
    The expectation follows the policy the test asked for (for `driver`, the one its CSIDriver
    declares), so a cluster that runs another than was asked fails it."""
    declared = _policy(ws)
    expected_policy = declared if policy == "driver" else policy
    ws.create(b.persistent_volume_claim("data", "1Gi", ws.storage_class("fsgroup")))
    gid = _pod_prints(ws, "app", "stat -c %g /data/0")[0]
    pv = x.bound_volume(ws, "data")
    fs_type = (o.spec(pv).get("csi") or {}).get("fsType")
    modes = o.spec(pv).get("accessModes") or []
    wanted = _fs_group_applies(ws, expected_policy)
    x.expect((gid == str(FS_GROUP)) == wanted,
             f"fsGroupPolicy {expected_policy or 'unset (ReadWriteOnceWithFSType)'} (the CSIDriver says "
             f"{declared or 'nothing'}), access modes {modes}, fsType {fs_type or 'none'}: the kubelet "
             f"{'must' if wanted else 'must not'} give the volume group {FS_GROUP}; the pod reads group {gid}",
             pv, ws=ws)


@allure.story("fsGroupChangePolicy OnRootMismatch leaves a volume whose root already matches as it is; Always walks it")
def test_on_root_mismatch_skips_a_volume_whose_root_matches(ws: Workspace) -> None:
    """The first pod's kubelet gives the volume the fsGroup (root: the group, its rwx bits
    and setgid); as root the pod then gives one file another group by hand. A second pod
    with OnRootMismatch finds the root as a walk leaves it, so the kubelet does not walk and
    the file keeps the hand-made group; a third with Always walks, and the file gets the
    fsGroup again (kubelet volume_linux.go; the answers are walks_the_volume's)."""
    ws.create(b.persistent_volume_claim("data", "1Gi", ws.storage_class("fsgroup-change")))
    ws.create(b.pod("probe", ("data",)))  # binds the claim, so the policy can be judged before any walk
    if not _fs_group_applies(ws, _policy(ws)):
        pytest.skip(f"driver {ws.driver.name}: not applicable: its fsGroupPolicy ({_policy(ws) or 'unset'}) gives "
                    "this volume no fsGroup, so there is no walk to skip")
    ws.delete("Pod", "probe")
    root_gid, root_mode = _pod_prints(
        ws, "first", f"mkdir -p /data/0/sub && echo x > /data/0/sub/f && chgrp {OTHER_GROUP} /data/0/sub/f && "
                     "stat -c '%g %a' /data/0")
    ws.delete("Pod", "first")
    # the case the test is about: a root as the kubelet's walk leaves it (else OnRootMismatch
    # walks too, and the test could not tell a kubelet that skips from one that never does)
    x.expect(not root_needs_change(int(root_gid), int(root_mode, 8), FS_GROUP),
             f"the first pod's kubelet walked the volume with fsGroup {FS_GROUP}, so its root has that group, "
             f"group rwx and setgid; it has group {root_gid} mode {root_mode}", ws.get("PersistentVolumeClaim", "data"),
             ws=ws)
    for name, change_policy in (("second", ON_ROOT_MISMATCH), ("third", "Always")):
        walks = walks_the_volume(change_policy, int(root_gid), int(root_mode, 8), FS_GROUP)
        gid = _pod_prints(ws, name, "stat -c %g /data/0/sub/f", change_policy)[0]
        want = str(FS_GROUP) if walks else str(OTHER_GROUP)
        x.expect(gid == want, f"fsGroupChangePolicy {change_policy}, root left with group {root_gid} mode "
                 f"{root_mode}: the kubelet {'walks' if walks else 'does not walk'} the volume, so sub/f has "
                 f"group {want}; the pod reads {gid}", ws.get("Pod", name), ws=ws)
        ws.delete("Pod", name)
