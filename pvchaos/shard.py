"""`pvchaos run --shard K/N`: which of the selected tests shard K of N runs.

Why it exists: a nightly matrix (versions x backends) does not fit one 2-core machine,
so a CI system runs N jobs, each with `--shard K/N`, and a last job merges their reports
(`pvchaos report merge`). That only works if every job computes the same split from the
same test set, without talking to the others, so everything here is a pure function of
the selected test ids, their cluster groups and the recorded durations:

- tests that share a cluster (one `xdist_group`, or one non-disruptive `cluster(...)`
  configuration) form one unit and go to one shard: splitting them would start that
  cluster once per shard;
- units are placed largest first on the least loaded shard (ties: the lower shard),
  weighed by the durations the report history recorded, or by test count without them;
- the order of the input does not matter (units are sorted by weight, then by id).

The split is the same on every machine only if every shard reads the same history: CI
hands every shard job the same previous report. `pvchaos report merge` checks that the
shards' tests are disjoint and cover the selection, so a disagreement cannot go unseen.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, order=True)
class Shard:
    """Shard `index` (1-based) of `total`."""

    index: int
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"

    @property
    def tag(self) -> str:
        """What names created by this shard carry (`s2`), so shards on one cluster never collide."""
        return f"s{self.index}"


def parse_shard(text: str) -> Shard:
    """`"2/3"` -> Shard(2, 3); anything else is a ValueError with the one line the user sees."""
    match = _FORM.match(text or "")
    if not match:
        raise ValueError(f"--shard {text!r}: want K/N with whole numbers, e.g. --shard 2/3")
    index, total = int(match.group(1)), int(match.group(2))
    if total < 1 or not 1 <= index <= total:
        raise ValueError(f"--shard {text}: K must be between 1 and N (N >= 1), e.g. --shard 1/{max(total, 2)}")
    return Shard(index, total)


@dataclass(frozen=True)
class Case:
    """A selected test: its id (`module::name[params]`) and the cluster group it belongs
    to (None: it shares nothing worth keeping together)."""

    id: str
    group: str | None = None


def _weights(tests: Sequence[Case], durations: Mapping[str, float]) -> dict[str, float]:
    """Each test's weight: its recorded duration, the median of the known ones for a test
    the history has not seen, and 1 for every test when nothing was recorded."""
    known = [durations[t.id] for t in tests if t.id in durations]
    if not known:
        return {t.id: 1.0 for t in tests}
    fallback = statistics.median(known)
    return {t.id: max(durations.get(t.id, fallback), 0.001) for t in tests}


def split(tests: Iterable[Case], total: int, durations: Mapping[str, float] | None = None) -> list[list[str]]:
    """The test ids of each of `total` shards (index 0 is shard 1/N), each list sorted.

    Every test lands in exactly one shard. Units (a group, or a test of no group) are
    placed heaviest first on the lightest shard; a shard may stay empty when there are
    fewer units than shards."""
    if total < 1:
        raise ValueError(f"cannot split into {total} shards")
    unique = {t.id: t for t in tests}  # a test collected twice is still one test
    weights = _weights(list(unique.values()), durations or {})
    units: dict[str, list[str]] = {}
    for test in unique.values():
        units.setdefault(f"group:{test.group}" if test.group else f"test:{test.id}", []).append(test.id)
    ordered = sorted(units.items(), key=lambda kv: (-sum(weights[i] for i in kv[1]), kv[0]))
    loads = [0.0] * total
    shards: list[list[str]] = [[] for _ in range(total)]
    for _, ids in ordered:
        lightest = min(range(total), key=lambda s: (loads[s], s))
        shards[lightest] += ids
        loads[lightest] += sum(weights[i] for i in ids)
    return [sorted(s) for s in shards]


def select(tests: Iterable[Case], shard: Shard, durations: Mapping[str, float] | None = None) -> list[str]:
    """The ids shard `shard` runs."""
    return split(tests, shard.total, durations)[shard.index - 1]


def fingerprint(test_ids: Iterable[str]) -> str:
    """A short digest of a test selection: equal for equal sets, whatever their order."""
    text = "\n".join(sorted(set(test_ids)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def split_key(durations: Mapping[str, float]) -> str:
    """A digest of the durations a split used: shards that disagree on it may disagree on
    the split (merge reports which)."""
    return hashlib.sha256(json.dumps(sorted(durations.items())).encode()).hexdigest()[:16]


def case_id(module: str, name: str) -> str:
    """`test_reclaim::test_delete_policy_removes_volume[x]`: the key shared by pytest items
    (file stem and item name) and Allure results (`pvchaos.results.test_key` without tags)."""
    return f"{module}::{name}"


def durations_from_history(lines: Iterable[str]) -> dict[str, float]:
    """Test id -> median duration (s) over the runs of an Allure `history.jsonl`.

    A merged report holds each test once per backend and version; the median over all of
    them is what a shard of any of them should expect. Unreadable lines are skipped."""
    seen: dict[str, list[float]] = {}
    for line in lines:
        try:
            run = json.loads(line)
        except ValueError:
            continue
        for result in (run.get("testResults") or {}).values() if isinstance(run, dict) else ():
            if not isinstance(result, dict) or not isinstance(result.get("duration"), int | float):
                continue
            full = str(result.get("fullName") or "")
            if not full or full.startswith("pvchaos.") or "name" not in result:
                continue  # results the harness wrote itself (comparisons) are not tests
            module = full.split("#", 1)[0].rsplit(".", 1)[-1]
            seen.setdefault(case_id(module, str(result["name"])), []).append(result["duration"] / 1000)
    return {k: statistics.median(v) for k, v in sorted(seen.items())}
