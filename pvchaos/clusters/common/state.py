"""Where clusters the harness starts keep their state on this machine (every backend
that starts clusters: local's directories and kind's)."""

from __future__ import annotations

import os
from pathlib import Path

from pvchaos.tools.build import cache_root


def state_root() -> Path:
    """$PVCHAOS_STATE_DIR, else `<cache>/clusters`."""
    root = Path(os.environ.get("PVCHAOS_STATE_DIR", cache_root() / "clusters")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root
