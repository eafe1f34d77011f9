"""The watch wait's `seen` hook and the storm's incremental Tracker, on a scripted
list and watch (no cluster): every listed and changed object is heard once, deletions
as None, and the Tracker's counts follow goals that are reached and lost again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pvchaos.kit.storm import Tracker
from pvchaos.kube import wait


def pod(name: str, phase: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "status": {"phase": phase}}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The first list gives a Pending pod `a`; the watch then plays the returned events in
    order, once; a re-list (after the watch ended) gives what the events left."""
    events: list[tuple[str, dict[str, Any]]] = []
    lists = 0

    def list_objects(kube: object, kind: str, namespace: str | None = None, **sel: Any) -> tuple[list, str]:
        nonlocal lists
        lists += 1
        if lists == 1:
            return [pod("a", "Pending")], "1"
        state = {"a": pod("a", "Pending")}
        for change, obj in events:
            if change == "DELETED":
                state.pop(obj["metadata"]["name"], None)
            else:
                state[obj["metadata"]["name"]] = obj
        return list(state.values()), "2"

    def watch_objects(kube: object, kind: str, namespace: str | None, rv: str | None, timeout: int,
                      **sel: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        if lists == 1:  # the events happen once; a later watch sees nothing new
            yield from events

    monkeypatch.setattr(wait, "list_objects", list_objects)
    monkeypatch.setattr(wait, "watch_objects", watch_objects)
    return events


def test_seen_hears_listed_changed_and_deleted_objects(scripted: list) -> None:
    scripted += [("ADDED", pod("b", "Pending")), ("DELETED", pod("b", "Pending")), ("MODIFIED", pod("a", "Running"))]
    heard: list[tuple[str, str | None]] = []

    def done(state: wait.State) -> bool | None:
        return True if wait.o.phase(state.get("ns/a")) == "Running" else None

    assert wait.wait_for_state(None, "Pod", done, "a Running", "ns", timeout=5,  # type: ignore[arg-type]
                               seen=lambda key, obj: heard.append((key, wait.o.phase(obj) if obj else None)))
    assert heard == [("ns/a", "Pending"), ("ns/b", "Pending"), ("ns/b", None), ("ns/a", "Running")]


def test_tracker_counts_goals_reached_lost_and_gone(scripted: list) -> None:
    scripted += [("ADDED", pod("b", "Running")), ("MODIFIED", pod("b", "Pending")),  # b reached, then lost
                 ("MODIFIED", pod("a", "Running")),  # a reached; b still not: no finish yet
                 ("DELETED", pod("b", "Pending"))]  # b gone: every pod left is Running, but only 1 of 2 expected
    tracker = Tracker(None, "Pod", "ns", 2, lambda p: wait.o.phase(p) == "Running", "pods Running")  # type: ignore[arg-type]
    assert not tracker.run(timeout=1)
    assert tracker.good == {"ns/a"}
    assert set(tracker.reached) == {"ns/a", "ns/b"}  # the first time each reached it stays recorded
    assert "all 2 pods Running" in (tracker.error or "")


def test_tracker_finishes_when_all_expected_reach_the_goal(scripted: list) -> None:
    scripted += [("ADDED", pod("b", "Running")), ("MODIFIED", pod("a", "Running"))]
    tracker = Tracker(None, "Pod", "ns", 2, lambda p: wait.o.phase(p) == "Running", "pods Running")  # type: ignore[arg-type]
    assert tracker.run(timeout=5)
    assert tracker.good == {"ns/a", "ns/b"} and tracker.last() >= min(tracker.reached.values())
