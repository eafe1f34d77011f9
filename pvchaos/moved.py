"""The old top-level names (`kube`, `clusters`, `drivers`, `chaos`, `conformance`,
`tools`), kept for one release after they moved under `pvchaos.`.

Why a fallback finder and not six alias packages: alias packages installed at the top
level would shadow a user's own `tools/` or `kube/` again, which is what the move ended.
This finder asks every other finder first, so a project's own package of that name
always wins; only an import nothing else can satisfy (a suite written against the old
layout) gets the module from its new home, and a DeprecationWarning naming the new
import. Submodules of an alias (`kube.objects`) resolve to the same module objects as
`pvchaos.kube.objects`, never to a second copy. The pytest plugin installs it
(pvchaos/plugin/__init__.py).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED = ("kube", "clusters", "drivers", "chaos", "conformance", "tools")
REMOVED_IN = "0.3"  # the release after the move (0.2) drops these names


class _Alias(importlib.abc.Loader):
    """Loads `old` by importing `pvchaos.<old>` and putting that very module in its place
    (one module object under two names, so isinstance and module state agree)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(self.new)


class MovedFinder(importlib.abc.MetaPathFinder):
    """Resolves an old name to its new home, with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".", 1)[0]
        if top not in MOVED:
            return None
        if "." in fullname:
            parent = sys.modules.get(top)
            if parent is None or parent.__name__ != f"pvchaos.{top}":
                return None  # a user's own package of that name: its submodules are its own
        elif self._found_elsewhere(fullname):
            return None
        new = f"pvchaos.{fullname}"
        if importlib.util.find_spec(new) is None:
            return None
        warnings.warn(f"`{fullname}` moved to `{new}`; import it from there (the old name goes away in "
                      f"pvchaos {REMOVED_IN})", DeprecationWarning, stacklevel=3)
        return importlib.machinery.ModuleSpec(fullname, _Alias(new), is_package=True)


    def _found_elsewhere(self, fullname: str) -> bool:
        """Whether any other finder (sys.path, editable installs) provides `fullname`."""
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                if finder.find_spec(fullname, None) is not None:
                    return True
            except (ImportError, ValueError):
                continue
        return False


def install() -> None:
    """Put the finder first on sys.meta_path, once (it defers to the others itself)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
