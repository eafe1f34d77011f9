"""Every failure class the harness raises, declared once and sorted by whom it blames.

A report tells the reader where to look: a *product* failure means Kubernetes did not
do what it promises (the verdict stands), an *infrastructure* failure means the harness
could not reach or start what it needed (the verdict is unknown). "Condition not
reached" while the API server answered is a product failure; "API unreachable" is not.
The report's categories are built from the two tuples at the bottom, so a new class is
filed by declaring it here.
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

ApiError = ApiException  # what the API server answered with an error status (422, 404...)


class ProductFailure(AssertionError):
    """Kubernetes behaved differently from what it promises; the message shows the evidence."""


class ConditionNotReached(ProductFailure):
    """A wait ran out while the API server kept answering: the state never came."""


class WaitFailed(ProductFailure):
    """The awaited object reached a state from which the expected one cannot follow."""


class ExpectationFailed(ProductFailure):
    """A suite's expectation did not hold."""


class InvariantViolation(ProductFailure):
    """A cluster-wide invariant broke during a test (see conformance.invariants)."""


class CanaryFailed(ProductFailure):
    """A canary found a behaviour this test relies on broken on its cluster, so the test
    did not run; the message is the canary's diagnosis (pvchaos/kit/canaries.py)."""


class InfrastructureError(RuntimeError):
    """The harness could not reach or run what the test needs; nothing is proven."""


class ApiUnreachable(InfrastructureError):
    """The API server did not answer (connection refused, reset, timed out, 5xx)."""


class ClusterError(InfrastructureError):
    """A cluster could not be provided; the message is one line naming the cause."""


class PollTimeout(InfrastructureError, TimeoutError):
    """A process-level readiness check (a port, /readyz) did not pass in time.

    `aborted` is True when the wait ended early because its abort check gave a reason
    (a component exited), so callers need not diagnose a deadline that never came.
    """

    def __init__(self, message: str, aborted: bool = False) -> None:
        super().__init__(message)
        self.aborted = aborted


WaitTimeout = ConditionNotReached  # the name suites and docs have used since the start

PRODUCT_ERRORS: tuple[type[BaseException], ...] = (CanaryFailed, ConditionNotReached, WaitFailed, ExpectationFailed,
                                                   InvariantViolation, ProductFailure)
INFRA_ERRORS: tuple[type[BaseException], ...] = (ApiUnreachable, ClusterError, PollTimeout, InfrastructureError)
