"""fsGroup on the driver's volumes (issue 35; upstream's fsgroupchangepolicy suite): the
kubelet gives a volume's root the pod's fsGroup as the CSIDriver's fsGroupPolicy says:
File always, None never, ReadWriteOnceWithFSType (the default) for a ReadWriteOnce volume
with an fsType. The expectation is the pure oracle's (volume_evidence.fs_group_applies);
the ownership is what the pod itself reads, so any driver can be judged."""

from __future__ import annotations

import allure
import pytest

from pvchaos.api import Workspace, b, kinds, o, x
from pvchaos.conformance.volume_evidence import fs_group_applies
from pvchaos.kube.poll import poll_until
from pvchaos.tools.nodeimage.recipe import TEST_IMAGE  # busybox, built into the kind node image

pytestmark = [allure.epic("Real kubelets"), allure.feature("fsGroup"),
              pytest.mark.needs("real-kubelet", "dynamic-zonal"), pytest.mark.exercises("fsgroup")]

FS_GROUP = 2345


@allure.story("the volume root's group is the pod's fsGroup exactly when the driver's fsGroupPolicy says so")
@pytest.mark.quick
def test_fs_group_follows_the_drivers_policy(ws: Workspace) -> None:
    csidriver = kinds.get(ws.kube, "CSIDriver", ws.driver.name) or {}
    policy = (csidriver.get("spec") or {}).get("fsGroupPolicy")
    sc = ws.storage_class("fsgroup")
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    pod = b.pod("app", ("data",))
    pod["spec"]["securityContext"] = {"fsGroup": FS_GROUP}
    pod["spec"]["containers"][0].update({"image": TEST_IMAGE,
                                         "command": ["sh", "-c", "stat -c %g /data/0; exec sleep 3600"]})
    ws.create(pod)
    x.pod_runs(ws, "app", timeout=120)
    pv = x.bound_volume(ws, "data")
    fs_type = (o.spec(pv).get("csi") or {}).get("fsType")
    modes = o.spec(pv).get("accessModes") or []
    wanted = fs_group_applies(policy, modes, fs_type)
    # a log cannot be watched: polled, bounded
    gid = poll_until(lambda: next(iter(kinds.pod_log(ws.kube, "app", ws.namespace).split()), None), 60,
                     "the pod printed its volume's group", interval=1.0)
    x.expect((gid == str(FS_GROUP)) == wanted,
             f"fsGroupPolicy {policy or 'unset (ReadWriteOnceWithFSType)'}, access modes {modes}, fsType "
             f"{fs_type or 'none'}: the kubelet {'must' if wanted else 'must not'} give the volume group "
             f"{FS_GROUP}; the pod reads group {gid}", pv, ws=ws)
