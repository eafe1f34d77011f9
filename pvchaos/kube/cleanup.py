"""The one way the harness cleans up: undo callbacks registered at creation, run last-in
first-out, every error gathered into one ExceptionGroup so no deletion is skipped.

Pushing is thread-safe (a stress suite creates objects from several threads), and an
entry can be dropped by its key once the thing it undoes is already gone, so a test that
deletes 700 pods itself does not have them deleted again at teardown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any


class Cleanup:
    """A stack of undo actions. Register right after creating (or before injecting)."""

    def __init__(self, label: str = "cleanup") -> None:
        self.label = label
        self._stack: list[tuple[str, Callable[[], Any], Hashable | None]] = []
        self._keyed: set[Hashable] = set()
        self._lock = threading.Lock()

    def push(self, what: str, undo: Callable[[], Any], key: Hashable | None = None) -> None:
        """Register an undo; `key` names it for `discard` (e.g. ("Pod", "ns", "name"))."""
        with self._lock:
            self._stack.append((what, undo, key))
            if key is not None:
                self._keyed.add(key)

    def discard(self, key: Hashable) -> bool:
        """Drop the newest undo registered under `key` (its object is already gone); False
        when there is none. The rest of the stack keeps its order."""
        with self._lock:
            if key not in self._keyed:
                return False
            for i in range(len(self._stack) - 1, -1, -1):
                if self._stack[i][2] == key:
                    del self._stack[i]
                    break
            if not any(k == key for _, _, k in self._stack):
                self._keyed.discard(key)
            return True

    def __len__(self) -> int:
        return len(self._stack)

    def _pop(self) -> tuple[str, Callable[[], Any]] | None:
        with self._lock:
            if not self._stack:
                return None
            what, undo, _ = self._stack.pop()
            return what, undo

    def run(self) -> None:
        """Run every undo, newest first; raise one ExceptionGroup naming each failure."""
        errors: list[Exception] = []
        interrupted: BaseException | None = None
        while (entry := self._pop()) is not None:
            what, undo = entry
            try:
                undo()
            except KeyboardInterrupt as exc:  # finish undoing, then let the interrupt through
                interrupted = exc
            except Exception as exc:  # noqa: BLE001 - gathered and re-raised below
                exc.add_note(f"while undoing: {what}")
                errors.append(exc)
        self._keyed.clear()
        if errors:
            raise ExceptionGroup(f"{self.label}: {len(errors)} undo action(s) failed", errors)
        if interrupted is not None:
            raise interrupted

    def __enter__(self) -> Cleanup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.run()
