"""The one way the harness waits for Kubernetes: watch first, tenacity as the bound.

A wait lists the objects, then watches from that resourceVersion, re-evaluating the
condition on every change, so it returns within milliseconds of the API server
recording the awaited state. tenacity bounds the whole wait and re-lists after a
dropped or expired watch. A timeout raises `WaitTimeout` carrying what was expected,
the last object seen and its recent events; a state that cannot turn good (`fail_if`)
ends the wait at once with `WaitFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import tenacity
import urllib3
import yaml
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from clusters.kube import Kube
from pvchaos.resources import Obj, event_lines, events_for, kind, list_raw

T = TypeVar("T")
State = dict[str, Obj]


class WaitTimeout(AssertionError):
    """Expected state not reached in time. Subclasses AssertionError: the cluster did
    not do what Kubernetes promises within the bound, which is a test failure."""


class WaitFailed(AssertionError):
    """The awaited object reached a state from which the expected one cannot follow."""


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
    **selectors: Any,
) -> T:
    """Watch the objects of a kind (narrowed by label/field `selectors`) until `until`
    returns a non-None value, which is returned. `focus` picks the object shown on failure."""
    deadline = time.monotonic() + timeout
    state: State = {}

    def attempt() -> T:
        items, rv = list_raw(kube, kind_name, namespace, **selectors)
        state.clear()
        state.update({_key(o): o for o in items})
        if (result := _check(state, until, fail_if)) is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _NotYet
        for _ in _watch_into(state, kube, kind_name, namespace, rv, remaining, selectors):
            if (result := _check(state, until, fail_if)) is not None:
                return result
            if time.monotonic() >= deadline:
                break
        raise _NotYet

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(0.2),
        retry=tenacity.retry_if_exception_type((_NotYet, ApiException, urllib3.exceptions.HTTPError)),
        reraise=True,
    )
    try:
        return retrying(attempt)
    except (_NotYet, ApiException, urllib3.exceptions.HTTPError) as exc:
        shown = focus(state) if focus else (next(iter(state.values())) if len(state) == 1 else None)
        where = f" in namespace {namespace}" if namespace else ""
        seen = describe(shown, kube) if shown is not None else _summary(state)
        cause = "" if isinstance(exc, _NotYet) else f" (last error: {exc})"
        raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {kind_name}{where}: {expect}{cause}\n"
                          f"last seen:\n{seen}") from None
    except _Failed as exc:
        shown = focus(state) if focus else (next(iter(state.values())) if len(state) == 1 else None)
        raise WaitFailed(f"{kind_name}: {exc.reason}; expected: {expect}\nlast seen:\n"
                         f"{describe(shown, kube) if shown else _summary(state)}") from None


def wait_for(
    kube: Kube,
    kind_name: str,
    name: str,
    until: Callable[[Obj | None], bool],
    expect: str,
    namespace: str | None = None,
    timeout: float = 60.0,
    fail_if: Callable[[Obj | None], str | None] | None = None,
) -> Obj | None:
    """Wait for one named object to satisfy `until` (which may also accept None = gone)."""
    key = f"{namespace}/{name}" if namespace else name

    def done(state: State) -> list[Obj | None] | None:
        obj = state.get(key)
        return [obj] if until(obj) else None

    def failed(state: State) -> str | None:
        return fail_if(state.get(key)) if fail_if else None

    result = wait_for_state(kube, kind_name, done, f"{key}: {expect}", namespace, timeout,
                            failed if fail_if else None, focus=lambda s: s.get(key),
                            field_selector=f"metadata.name={name}")
    return result[0]


def wait_for_event(kube: Kube, obj: Obj, contains: str | tuple[str, ...], reason: str | None = None,
                   timeout: float = 60.0) -> Obj:
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
                              namespace, timeout, field_selector=f"involvedObject.name={meta.get('name')}")
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}\nabout:\n{describe(obj, kube)}") from None


def holds_for(
    kube: Kube,
    kind_name: str,
    violation: Callable[[State], str | None],
    seconds: float,
    what: str,
    namespace: str | None = None,
    **selectors: Any,
) -> State:
    """Watch for `seconds` and fail at once if `violation` reports one: how a test asserts
    that something does NOT happen (no eviction, no rebinding) over a bounded window."""
    deadline = time.monotonic() + seconds
    state: State = {}
    while True:
        items, rv = list_raw(kube, kind_name, namespace, **selectors)
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
        except (ApiException, urllib3.exceptions.HTTPError):
            pass
        if time.monotonic() >= deadline:
            return state


def _watch_into(state: State, kube: Kube, kind_name: str, namespace: str | None, rv: str, remaining: float,
                selectors: dict[str, Any]) -> Iterator[Obj]:
    """Watch from `rv` for about `remaining` seconds, applying each change to `state` and
    yielding the changed object; ends early on a watch error (the caller re-lists)."""
    k = kind(kind_name)
    w = watch.Watch()
    args = (namespace,) if k.namespaced else ()
    try:
        for event in w.stream(k.lister(kube), *args, resource_version=rv, deserialize=False,
                              timeout_seconds=max(1, int(remaining) + 1), allow_watch_bookmarks=False, **selectors):
            if event["type"] == "ERROR":
                return
            obj = event.get("raw_object") or event["object"]
            obj.setdefault("kind", kind_name)
            if event["type"] == "DELETED":
                state.pop(_key(obj), None)
            else:
                state[_key(obj)] = obj
            yield obj
    finally:
        w.stop()


# ---- common conditions -------------------------------------------------------------------

def phase_is(phase: str) -> Callable[[Obj | None], bool]:
    return lambda o: o is not None and (o.get("status") or {}).get("phase") == phase


def pod_running(o: Obj | None) -> bool:
    return o is not None and (o.get("status") or {}).get("phase") == "Running"


def pod_cannot_run(o: Obj | None) -> str | None:
    """A pod that Failed or Succeeded will never turn Running."""
    phase = (o or {}).get("status", {}).get("phase")
    return f"pod reached phase {phase}" if phase in ("Failed", "Succeeded") else None


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
        status = obj.get("status") or {}
        lines.append(f"  {key}: phase={status.get('phase')} node={(obj.get('spec') or {}).get('nodeName')}")
    return "\n".join(lines)


class _NotYet(Exception):
    pass


class _Failed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

