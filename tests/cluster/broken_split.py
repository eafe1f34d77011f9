"""A pytest plugin for tests/cluster/test_shards.py's failing-once check: a shard split
that drops one test (the first shard's last), loaded with `-p tests.cluster.broken_split`
when PVCHAOS_BREAK_SPLIT=1 is set for that test, so the equivalence it asserts can be
seen to fail."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pvchaos.plugin import sharding
from pvchaos.shard import Case

_real = sharding.split


def _dropping(cases: Iterable[Case], total: int, durations: Mapping[str, float] | None = None) -> list[list[str]]:
    parts = _real(cases, total, durations)
    return [p[:-1] if i == 0 else p for i, p in enumerate(parts)]


sharding.split = _dropping  # type: ignore[assignment]
