"""Names for everything the harness creates: a prefix, the worker id and a random
suffix, so parallel workers never collide and a sweeper can find leftovers."""

from __future__ import annotations

import os
import re
import secrets

PREFIX = "pvchaos"
OWNED_LABEL = "pvchaos.dev/owned"
TEST_LABEL = "pvchaos.dev/test"


def worker_id() -> str:
    """`gw0`, `gw1`... under pytest-xdist; `main` otherwise; prefixed with the shard
    (`s2-gw0`) under `--shard 2/N`, so shards sharing one cluster never collide."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    shard = os.environ.get("PVCHAOS_SHARD")  # set by pvchaos.plugin.sharding
    return f"{shard}-{worker}" if shard else worker


def slug(text: str, limit: int = 20) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-") or "x"


def unique(kind_hint: str, limit: int = 63) -> str:
    """`pvchaos-gw0-<hint>-a1b2c3`: DNS-1123, at most `limit` characters."""
    tail = f"-{secrets.token_hex(3)}"
    head = f"{PREFIX}-{slug(worker_id(), 8)}-{slug(kind_hint, 30)}"
    return (head[: limit - len(tail)].rstrip("-") + tail)


def owned_labels(test: str | None = None) -> dict[str, str]:
    labels = {OWNED_LABEL: "true", "pvchaos.dev/worker": slug(worker_id(), 8)}
    if test:
        labels[TEST_LABEL] = slug(test, 63)
    return labels
