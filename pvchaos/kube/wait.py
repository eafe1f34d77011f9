"""The one way the harness waits for Kubernetes: watch first, tenacity as the bound.

A wait lists the objects, then watches from that resourceVersion, re-evaluating the
condition on every change, so it returns within milliseconds of the API server
recording the awaited state. tenacity bounds the whole wait and re-lists after a
dropped or expired watch. A timeout raises `ConditionNotReached` (alias `WaitTimeout`)
carrying what was expected, the last object seen and its recent events, or
`ApiUnreachable` when the API server stopped answering (infrastructure, not a verdict);
a state that cannot turn good (`fail_if`) ends the wait at once with `WaitFailed`.
`wait_for` returns the object it awaited; `wait_gone` waits for a deletion.

Every wait charges its time to `pvchaos.kube.spent`: to the harness's waits, or, when the
caller names the upstream timer it sits out (`timer="node-monitor-grace-period"`), to
Kubernetes timers, so a run's summary shows which of the two its minutes went to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import tenacity
import urllib3
import yaml

from pvchaos.kube import objects as o
from pvchaos.kube import spent
from pvchaos.kube.client import Kube
from pvchaos.kube.errors import ApiError, ApiUnreachable, ConditionNotReached, WaitFailed, WaitTimeout
from pvchaos.kube.kinds import Obj, event_lines, events_for, list_objects, watch_objects

T = TypeVar("T")
State = dict[str, Obj]


__all__ = ["ConditionNotReached", "State", "WaitFailed", "WaitTimeout", "describe", "holds_for", "wait_for",
           "wait_for_event", "wait_for_state", "wait_gone"]
_TRANSIENT = (ApiError, urllib3.exceptions.HTTPError)


def describe(obj: Obj | None, kube: Kube | None = None, max_events: int = 8) -> str:
    """The object as short YAML plus its recent events: what a person needs to debug."""
    if obj is None:
        return "(object does not exist)"
    shown = {k: v for k, v in obj.items() if k in ("kind", "metadata", "spec", "status", "reason", "message",
                                                   "involvedObject", "count")}
    meta = dict(shown.get("metadata") or {})
    for noisy in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
        meta.pop(noisy, None)
    shown["metadata"] = meta
    text = yaml.safe_dump(shown, sort_keys=False, width=120).strip()
    if kube is not None:
        lines = event_lines(events_for(kube, obj))[-max_events:]
        text += "\nevents:\n" + ("\n".join(f"  {ln}" for ln in lines) if lines else "  (none)")
    return text


def wait_for_state(
    kube: Kube,
    kind_name: str,
    until: Callable[[State], T | None],
    expect: str,
    namespace: str | None = None,
    timeout: float = 60.0,
    fail_if: Callable[[State], str | None] | None = None,
    focus: Callable[[State], Obj | None] | None = None,
    seen: Callable[[str, Obj | None], None] | None = None,
    timer: str | None = None,
    **selectors: Any,
) -> T:
    """Watch the objects of a kind (narrowed by label/field `selectors`) until `until`
    returns a non-None value, which is returned. `focus` picks the object shown on failure.
    `seen(key, obj)` hears every listed object and every change (obj None: deleted) before
    `until` runs, so a wait over thousands of objects can keep its counts incrementally
    instead of rescanning the whole state at each event. `timer` names the upstream timer
    the wait sits out, if any (module docstring)."""
    with spent.charged(_category(timer)):
        return _wait_for_state(kube, kind_name, until, expect, namespace, timeout, fail_if, focus, seen, selectors)


def _wait_for_state(kube: Kube, kind_name: str, until: Callable[[State], T | None], expect: str,
                    namespace: str | None, timeout: float, fail_if: Callable[[State], str | None] | None,
                    focus: Callable[[State], Obj | None] | None, seen: Callable[[str, Obj | None], None] | None,
                    selectors: dict[str, Any]) -> T:
    deadline = time.monotonic() + timeout
    state: State = {}

    def attempt() -> T:
        items, rv = list_objects(kube, kind_name, namespace, **selectors)
        state.clear()
        state.update({_key(o): o for o in items})
        if seen is not None:
            for key, obj in state.items():
                seen(key, obj)
        if (result := _check(state, until, fail_if)) is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _NotYet
        for obj in _watch_into(state, kube, kind_name, namespace, rv, remaining, selectors):
            if seen is not None:
                key = _key(obj)
                seen(key, state.get(key))
            if (result := _check(state, until, fail_if)) is not None:
                return result
            if time.monotonic() >= deadline:
                break
        raise _NotYet

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(0.2),
        retry=tenacity.retry_if_exception_type((_NotYet, *_TRANSIENT)),
        reraise=True,
    )
    try:
        return retrying(attempt)
    except (_NotYet, *_TRANSIENT) as exc:
        where = f" in namespace {namespace}" if namespace else ""
        if _unreachable(exc):
            raise ApiUnreachable(f"API server stopped answering while waiting {timeout:.0f}s for {kind_name}{where}: "
                                 f"{expect} (last error: {_one_line(exc)})") from None
        shown = focus(state) if focus else (next(iter(state.values())) if len(state) == 1 else None)
        last_seen = describe(shown, kube) if shown is not None else _summary(state)
        cause = "" if isinstance(exc, _NotYet) else f" (last error: {_one_line(exc)})"
        raise ConditionNotReached(f"timed out after {timeout:.0f}s waiting for {kind_name}{where}: {expect}{cause}\n"
                                  f"last seen:\n{last_seen}") from None
    except _Failed as exc:
        shown = focus(state) if focus else (next(iter(state.values())) if len(state) == 1 else None)
        raise WaitFailed(f"{kind_name}: {exc.reason}; expected: {expect}\nlast seen:\n"
                         f"{describe(shown, kube) if shown else _summary(state)}") from None


def wait_for(
    kube: Kube,
    kind_name: str,
    name: str,
    until: Callable[[Obj], bool],
    expect: str,
    namespace: str | None = None,
    timeout: float = 60.0,
    fail_if: Callable[[Obj | None], str | None] | None = None,
    timer: str | None = None,
) -> Obj:
    """Wait for one named object to exist and satisfy `until`; returns it as last seen."""
    key = f"{namespace}/{name}" if namespace else name

    def done(state: State) -> Obj | None:
        obj = state.get(key)
        return obj if obj is not None and until(obj) else None

    def failed(state: State) -> str | None:
        return fail_if(state.get(key)) if fail_if else None

    return wait_for_state(kube, kind_name, done, f"{key}: {expect}", namespace, timeout,
                          failed if fail_if else None, focus=lambda s: s.get(key), timer=timer,
                          field_selector=f"metadata.name={name}")


def wait_gone(kube: Kube, kind_name: str, name: str, namespace: str | None = None, timeout: float = 60.0,
              expect: str = "deleted", terminating: bool = False, timer: str | None = None) -> None:
    """Wait until the named object no longer exists (or, with `terminating`, is being deleted:
    with no kubelet an evicted pod stays Terminating)."""
    key = f"{namespace}/{name}" if namespace else name

    def done(state: State) -> bool | None:
        obj = state.get(key)
        return True if obj is None or (terminating and o.terminating(obj)) else None

    wait_for_state(kube, kind_name, done, f"{key}: {expect}", namespace, timeout, focus=lambda s: s.get(key),
                   timer=timer, field_selector=f"metadata.name={name}")


def wait_for_event(kube: Kube, obj: Obj, contains: str | tuple[str, ...], reason: str | None = None,
                   timeout: float = 60.0, timer: str | None = None) -> Obj:
    """Wait for an event about `obj` whose message contains one of `contains`."""
    meta = obj.get("metadata") or {}
    wanted = (contains,) if isinstance(contains, str) else contains
    namespace = meta.get("namespace") or "default"

    def found(state: State) -> Obj | None:
        for ev in state.values():
            if reason and ev.get("reason") != reason:
                continue
            if any(w in (ev.get("message") or "") for w in wanted):
                return ev
        return None

    try:
        return wait_for_state(kube, "Event", found,
                              f"an event{' ' + reason if reason else ''} containing {' or '.join(map(repr, wanted))}",
                              namespace, timeout, timer=timer,
                              field_selector=f"involvedObject.name={meta.get('name')}")
    except ConditionNotReached as exc:
        raise ConditionNotReached(f"{exc}\nabout:\n{describe(obj, kube)}") from None


def holds_for(
    kube: Kube,
    kind_name: str,
    violation: Callable[[State], str | None],
    seconds: float,
    what: str,
    namespace: str | None = None,
    timer: str | None = None,
    **selectors: Any,
) -> State:
    """Watch for `seconds` and fail at once if `violation` reports one: how a test asserts
    that something does NOT happen (no eviction, no rebinding) over a bounded window.
    `timer`: the upstream timer the window sits out, if any (module docstring)."""
    with spent.charged(_category(timer)):
        return _holds_for(kube, kind_name, violation, seconds, what, namespace, selectors)


def _holds_for(kube: Kube, kind_name: str, violation: Callable[[State], str | None], seconds: float, what: str,
               namespace: str | None, selectors: dict[str, Any]) -> State:
    deadline = time.monotonic() + seconds
    state: State = {}
    while True:
        items, rv = list_objects(kube, kind_name, namespace, **selectors)
        state = {_key(o): o for o in items}
        if reason := violation(state):
            raise WaitFailed(f"{what} broke: {reason}\n{_summary(state)}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return state
        try:
            for obj in _watch_into(state, kube, kind_name, namespace, rv, remaining, selectors):
                if reason := violation(state):
                    raise WaitFailed(f"{what} broke after {seconds - (deadline - time.monotonic()):.1f}s: "
                                     f"{reason}\nlast seen:\n{describe(obj, kube)}")
                if time.monotonic() >= deadline:
                    return state
        except _TRANSIENT:
            pass
        if time.monotonic() >= deadline:
            return state


def _category(timer: str | None) -> str:
    return spent.TIMERS if timer else spent.WAITS


def _watch_into(state: State, kube: Kube, kind_name: str, namespace: str | None, rv: str, remaining: float,
                selectors: dict[str, Any]) -> Iterator[Obj]:
    """Watch from `rv` for about `remaining` seconds, applying each change to `state` and
    yielding the changed object; ends early on a watch error (the caller re-lists)."""
    for kind_of_change, obj in watch_objects(kube, kind_name, namespace, rv, max(1, int(remaining) + 1), **selectors):
        if kind_of_change == "DELETED":
            state.pop(_key(obj), None)
        else:
            state[_key(obj)] = obj
        yield obj


# ---- common conditions -------------------------------------------------------------------

def phase_is(phase: str) -> Callable[[Obj], bool]:
    return lambda obj: o.phase(obj) == phase


def pod_running(obj: Obj) -> bool:
    return o.phase(obj) == "Running"


def pod_cannot_run(obj: Obj | None) -> str | None:
    """A pod that Failed or Succeeded will never turn Running."""
    phase = o.phase(obj)
    return f"pod reached phase {phase}" if phase in ("Failed", "Succeeded") else None


def _unreachable(exc: BaseException) -> bool:
    """A transport failure or a server error, as opposed to an answer about the object."""
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return True
    return isinstance(exc, ApiError) and (not exc.status or exc.status >= 500)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")


def _check(state: State, until: Callable[[State], T | None], fail_if: Callable[[State], str | None] | None) -> T | None:
    result = until(state)
    if result is not None:
        return result
    if fail_if is not None and (reason := fail_if(state)):
        raise _Failed(reason)
    return None


def _summary(state: State) -> str:
    if not state:
        return "(no matching objects)"
    lines = []
    for key, obj in sorted(state.items())[:20]:
        lines.append(f"  {key}: phase={o.phase(obj)} node={o.node_name(obj)}")
    return "\n".join(lines)


class _NotYet(Exception):
    pass


class _Failed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

