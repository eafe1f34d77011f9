"""The names of the harness's own provisioners (the test double's), which every backend
recognises: local and kind run them, existing knows them when it finds them."""

from __future__ import annotations

ZONAL_PROVISIONER = "zonal.csi.pvchaos.dev"
LOCAL_PROVISIONER = "local.csi.pvchaos.dev"
