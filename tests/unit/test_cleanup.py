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
