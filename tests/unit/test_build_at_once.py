"""Independent builds run at the same time, and a failure is raised only after every
build has finished (issue 38: a half-finished build never races the next run's)."""

from __future__ import annotations

import threading
import time

import pytest

from pvchaos.tools.build import BuildError, build_at_once


def test_two_builds_overlap_and_every_build_finishes_before_an_error() -> None:
    inside = threading.Barrier(2, timeout=5)  # both must be running at once to pass it
    finished: list[str] = []

    def failing() -> None:
        inside.wait()
        raise BuildError("kube-apiserver: go exited 1")

    def slow() -> None:
        inside.wait()
        time.sleep(0.2)
        finished.append("etcd")

    with pytest.raises(BuildError, match="kube-apiserver"):
        build_at_once([failing, slow])
    assert finished == ["etcd"], "the other build ran to its end before the error was raised"


def test_one_at_a_time_keeps_the_order() -> None:
    order: list[int] = []
    build_at_once([lambda: order.append(1), lambda: order.append(2)], at_once=1)
    assert order == [1, 2]
