"""The one way the harness cleans up: undo callbacks registered at creation, run last-in
first-out, every error gathered into one ExceptionGroup so no deletion is skipped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Cleanup:
    """A stack of undo actions. Register right after creating (or before injecting)."""

    def __init__(self, label: str = "cleanup") -> None:
        self.label = label
        self._stack: list[tuple[str, Callable[[], Any]]] = []

    def push(self, what: str, undo: Callable[[], Any]) -> None:
        self._stack.append((what, undo))

    def __len__(self) -> int:
        return len(self._stack)

    def run(self) -> None:
        """Run every undo, newest first; raise one ExceptionGroup naming each failure."""
        errors: list[Exception] = []
        interrupted: BaseException | None = None
        while self._stack:
            what, undo = self._stack.pop()
            try:
                undo()
            except KeyboardInterrupt as exc:  # finish undoing, then let the interrupt through
                interrupted = exc
            except Exception as exc:  # noqa: BLE001 - gathered and re-raised below
                exc.add_note(f"while undoing: {what}")
                errors.append(exc)
        if errors:
            raise ExceptionGroup(f"{self.label}: {len(errors)} undo action(s) failed", errors)
        if interrupted is not None:
            raise interrupted

    def __enter__(self) -> Cleanup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.run()
