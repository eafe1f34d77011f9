"""The registry of backends: the one place a backend is chosen by its name.

Everything else asks `provider(name)` for the `Provider` (clusters/provider.py) and then
asks it for a `Feature`, never compares the name. Adding a backend is a package with a
`PROVIDER` object plus one line in `_BUILT_IN` (docs/architecture.md, "Adding a backend");
`register` adds one at run time (tests, plugins).
"""

from __future__ import annotations

from pvchaos.clusters import existing, kind
from pvchaos.clusters.local import provider as local
from pvchaos.clusters.provider import Feature, Provider

__all__ = ["Feature", "Provider", "has", "names", "provider", "register", "unregister"]

_BUILT_IN: tuple[Provider, ...] = (
    local.PROVIDER,
    kind.PROVIDER,
    existing.PROVIDER,
)
_REGISTRY: dict[str, Provider] = {p.name: p for p in _BUILT_IN}


def names(*features: Feature) -> tuple[str, ...]:
    """The registered backends' names (those with every one of `features`), in order."""
    return tuple(n for n, p in _REGISTRY.items() if all(f in p.features for f in features))


def provider(name: str) -> Provider:
    """The backend of that name, or ValueError naming the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; use {', '.join(_REGISTRY)}") from None


def has(name: str, feature: Feature) -> bool:
    """Whether the backend `name` declares `feature` (False for an unknown name)."""
    found = _REGISTRY.get(name)
    return found is not None and feature in found.features


def register(new: Provider) -> None:
    """Add a backend (refused when the name is taken)."""
    if new.name in _REGISTRY:
        raise ValueError(f"backend {new.name!r} is already registered")
    _REGISTRY[new.name] = new


def unregister(name: str) -> None:
    """Remove a backend added with `register` (built-in ones stay)."""
    if any(p.name == name for p in _BUILT_IN):
        raise ValueError(f"backend {name!r} is built in")
    _REGISTRY.pop(name, None)
