"""Default versions of everything the local backend builds, in one place."""

DEFAULT_K8S_VERSION = "v1.35.4"  # newest 1.35.x the module proxy serves; first with MutablePVNodeAffinity
DEFAULT_ETCD_VERSION = "v3.6.16"
DEFAULT_KWOK_VERSION = "v0.8.0"
SUPPORTED_MINORS = (34, 35, 36, 37)
