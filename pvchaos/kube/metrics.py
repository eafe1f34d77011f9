"""The API server's own /metrics text, read with the harness's credentials."""

from __future__ import annotations

from pvchaos.kube.client import Kube
from pvchaos.kube.errors import ApiError


def apiserver_metrics(kube: Kube, timeout: float = 10.0) -> str:
    """The Prometheus text of GET /metrics (needs the right to read that non-resource URL)."""
    request = kube.api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"])
    resp = kube.api.call_api(*request, _request_timeout=timeout)
    body = resp.read()
    if resp.status != 200:
        raise ApiError(status=resp.status, reason=f"GET /metrics: {body[:200]!r}")
    return bytes(body).decode(errors="replace")
