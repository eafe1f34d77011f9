"""Whether the kubelet walks a volume to give every file the pod's fsGroup, or leaves it
as it is (pod securityContext.fsGroupChangePolicy; issue 37). Read from
k8s.io/kubernetes v1.35.4 pkg/volume/volume_linux.go (skipPermissionChange,
requiresPermissionChange): `Always` (or unset) walks every time; `OnRootMismatch` walks
only when the volume's root does not already look changed: its group is the fsGroup, its
mode has the group's read, write (read for a read-only mount) and execute bits, and the
setgid bit. This answers only once the kubelet changes ownership at all (the CSIDriver's
fsGroupPolicy: `volume_evidence.fs_group_applies`).

Pure: numbers in, a bool out.
"""

from __future__ import annotations

RW_MASK = 0o660
RO_MASK = 0o440
EXEC_MASK = 0o110
SETGID = 0o2000
ON_ROOT_MISMATCH = "OnRootMismatch"

__all__ = ["ON_ROOT_MISMATCH", "root_needs_change", "walks_the_volume"]


def root_needs_change(root_gid: int, root_mode: int, fs_group: int, readonly: bool = False) -> bool:
    """True when the root's group or mode differs from what a walk leaves (then even
    OnRootMismatch walks)."""
    if root_gid != fs_group:
        return True
    wanted = (RO_MASK if readonly else RW_MASK) | EXEC_MASK
    return (root_mode & wanted) != wanted or not root_mode & SETGID


def walks_the_volume(change_policy: str | None, root_gid: int, root_mode: int, fs_group: int,
                     readonly: bool = False) -> bool:
    """Whether the kubelet changes every file's group before the pod starts, given the
    root it finds (its gid, and its mode as `stat -c %a` prints it, in octal)."""
    if change_policy != ON_ROOT_MISMATCH:
        return True
    return root_needs_change(root_gid, root_mode, fs_group, readonly)
