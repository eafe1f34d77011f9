"""The shard split (pvchaos/shard.py): parsing K/N, a stable split whatever the input
order, groups kept together, balance by recorded durations, every test exactly once."""

from __future__ import annotations

import json
import random

import pytest

from pvchaos.shard import Case, Shard, durations_from_history, fingerprint, parse_shard, select, split

TESTS = [Case(f"test_m{m}::test_{i}") for m in range(4) for i in range(7)] + [
    Case("test_pv::test_gate_off_a", "gate-off"), Case("test_pv::test_gate_off_b", "gate-off"),
    Case("test_pv::test_gate_off_c", "gate-off")]


@pytest.mark.parametrize("text, want", [("1/3", Shard(1, 3)), ("3/3", Shard(3, 3)), (" 2 / 2 ", Shard(2, 2)),
                                        ("1/1", Shard(1, 1))])
def test_parse_shard(text: str, want: Shard) -> None:
    assert parse_shard(text) == want
    assert str(want) == f"{want.index}/{want.total}"


@pytest.mark.parametrize("text", ["0/3", "4/3", "a/b", "1/0", "0/0", "", "2", "1/2/3", "-1/3", "1.5/3"])
def test_malformed_shards_are_one_line(text: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_shard(text)
    assert "\n" not in str(err.value) and "--shard" in str(err.value)


@pytest.mark.parametrize("total", [1, 2, 3, 5, 40])
def test_every_test_lands_in_exactly_one_shard(total: int) -> None:
    shards = split(TESTS, total)
    flat = [t for s in shards for t in s]
    assert sorted(flat) == sorted(t.id for t in TESTS) and len(flat) == len(set(flat))
    assert [select(TESTS, Shard(k, total)) for k in range(1, total + 1)] == shards


def test_split_does_not_depend_on_input_order() -> None:
    """Every machine collects the same tests, not necessarily in the same order."""
    shuffled = TESTS[:]
    for seed in range(5):
        random.Random(seed).shuffle(shuffled)
        assert split(shuffled, 3) == split(TESTS, 3)
        durations = {t.id: (i % 5) + 0.5 for i, t in enumerate(TESTS)}
        assert split(shuffled, 3, durations) == split(TESTS, 3, durations)


def test_a_group_stays_in_one_shard() -> None:
    for total in (2, 3, 4):
        holding = [s for s in split(TESTS, total) if any("gate_off" in t for t in s)]
        assert len(holding) == 1 and sum("gate_off" in t for t in holding[0]) == 3


def test_balanced_by_count_without_history() -> None:
    sizes = [len(s) for s in split([Case(f"t::{i}") for i in range(31)], 4)]
    assert max(sizes) - min(sizes) <= 1


def test_balanced_by_recorded_durations() -> None:
    """One 100 s test and ten 10 s tests: by count the long one would share a shard with
    five others (150 s against 50 s); by duration it runs alone next to the ten (100 s each)."""
    tests = [Case("t::long")] + [Case(f"t::short{i}") for i in range(10)]
    durations = {"t::long": 100.0, **{f"t::short{i}": 10.0 for i in range(10)}}
    assert split(tests, 2, durations) == [["t::long"], sorted(f"t::short{i}" for i in range(10))]
    by_count = split(tests, 2)
    assert {len(s) for s in by_count} == {5, 6}


def test_a_test_the_history_has_not_seen_weighs_the_median() -> None:
    tests = [Case("t::a"), Case("t::b"), Case("t::new")]
    assert split(tests, 2, {"t::a": 10.0, "t::b": 2.0}) == [["t::a"], ["t::b", "t::new"]]


def test_fingerprint_is_order_free_and_set_sensitive() -> None:
    ids = [t.id for t in TESTS]
    assert fingerprint(ids) == fingerprint(reversed(ids))
    assert fingerprint(ids) != fingerprint(ids[:-1])


def test_durations_from_allure_history() -> None:
    """Allure's history.jsonl: one line per run, results keyed by historyId, each with
    fullName (module#function), name (with parameters) and duration in ms."""
    def line(ms: int) -> str:
        return json.dumps({"uuid": "u", "testResults": {
            "h1": {"name": "test_x[a]", "fullName": "suites.test_reclaim#test_x", "duration": ms},
            "h2": {"name": "verdicts agree", "fullName": "pvchaos.compare_backends#verdicts", "duration": 5},
            "h3": {"name": "no duration", "fullName": "suites.test_reclaim#test_y"}}})
    got = durations_from_history([line(1000), "not json", line(3000), line(2500)])
    assert got == {"test_reclaim::test_x[a]": 2.5}
