"""The one way the harness cleans up: last in, first out; every undo runs; errors are
gathered; Ctrl-C during cleanup still finishes the stack."""

from __future__ import annotations

import pytest

from pvchaos.kube.cleanup import Cleanup


def test_undo_runs_newest_first() -> None:
    done: list[str] = []
    with Cleanup() as c:
        for name in ("namespace", "pv", "pod"):
            c.push(f"delete {name}", lambda name=name: done.append(name))
    assert done == ["pod", "pv", "namespace"] and len(c) == 0


def test_every_undo_runs_and_every_error_is_reported() -> None:
    done: list[str] = []

    def fail(what: str) -> None:
        raise RuntimeError(f"{what} refused")

    c = Cleanup("cleanup of test_x")
    c.push("delete a", lambda: done.append("a"))
    c.push("delete b", lambda: fail("b"))
    c.push("delete c", lambda: fail("c"))
    with pytest.raises(ExceptionGroup) as info:
        c.run()
    assert done == ["a"]
    assert str(info.value).startswith("cleanup of test_x: 2 undo action(s) failed")
    assert [e.__notes__ for e in info.value.exceptions] == [["while undoing: delete c"], ["while undoing: delete b"]]


def test_interrupt_finishes_the_stack_then_propagates() -> None:
    done: list[str] = []

    def interrupted() -> None:
        raise KeyboardInterrupt

    c = Cleanup()
    c.push("delete a", lambda: done.append("a"))
    c.push("stop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        c.run()
    assert done == ["a"]


def test_discard_drops_only_the_keyed_undo_and_keeps_the_order() -> None:
    done: list[str] = []
    c = Cleanup()
    for name in ("a", "b", "c"):
        c.push(f"delete {name}", lambda name=name: done.append(name), key=("Pod", name))
    assert c.discard(("Pod", "b")) is True
    assert c.discard(("Pod", "b")) is False, "a second discard finds nothing"
    assert c.discard(("Pod", "zzz")) is False
    c.run()
    assert done == ["c", "a"]


def test_push_from_many_threads_loses_nothing() -> None:
    import threading

    done: list[int] = []
    c = Cleanup()

    def pusher(base: int) -> None:
        for i in range(500):
            c.push("x", lambda n=base + i: done.append(n), key=base + i)

    threads = [threading.Thread(target=pusher, args=(k * 1000,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c) == 4000
    c.run()
    assert sorted(done) == sorted(k * 1000 + i for k in range(8) for i in range(500))
