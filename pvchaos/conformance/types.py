"""Names that must not mix, and tolerant access to Kubernetes JSON objects.

A node name, a zone and a PV name are all strings; ``NewType`` keeps them apart for
the type checker at no runtime cost. ``dig`` reads nested JSON without tripping on
missing keys or explicit ``None`` values, which ``sanitize_for_serialization`` and
hand-written fixtures both produce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NewType

NodeName = NewType("NodeName", str)
ZoneName = NewType("ZoneName", str)
PVName = NewType("PVName", str)
PVCName = NewType("PVCName", str)

KubeObject = Mapping[str, Any]
"""A Kubernetes object (or part of one) in JSON form."""


def dig(obj: Any, *path: str, default: Any = None) -> Any:
    """Follow ``path`` through nested mappings; ``default`` when any step is absent or None."""
    for key in path:
        if not isinstance(obj, Mapping):
            return default
        obj = obj.get(key)
        if obj is None:
            return default
    return obj
