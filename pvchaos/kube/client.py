"""The one place that turns a kubeconfig into API clients, and API objects into dicts.

Suites, injectors and the invariant checker all speak Kubernetes JSON (camelCase dicts,
as the API server sends them), which is what the pure oracle in `conformance/` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config


@dataclass(frozen=True)
class Kube:
    """Typed API groups sharing one connection."""

    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def storage(self) -> client.StorageV1Api:
        return client.StorageV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api)

    @property
    def scheduling(self) -> client.SchedulingV1Api:
        return client.SchedulingV1Api(self.api)

    @property
    def version(self) -> client.VersionApi:
        return client.VersionApi(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        """Kinds a CRD defines (VolumeSnapshot...): pvchaos.kube.kinds adapts their calls."""
        return client.CustomObjectsApi(self.api)

    @property
    def extensions(self) -> client.ApiextensionsV1Api:
        return client.ApiextensionsV1Api(self.api)


def connect(kubeconfig: Path | str, context: str | None = None, timeout: float = 10.0,
            pool_size: int | None = None) -> Kube:
    """A client for this kubeconfig/context; never reads ~/.kube/config implicitly.
    `pool_size` keeps that many connections open: one per thread of a bulk creation."""
    # Local clusters serve self-signed certificates on loopback; kubeconfigs say so explicitly.
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), context=context, client_configuration=cfg,
                            persist_config=False)
    cfg.retries = 2
    if pool_size is not None:
        cfg.connection_pool_maxsize = pool_size
    api = client.ApiClient(cfg)
    api.rest_client.pool_manager.connection_pool_kw["timeout"] = timeout
    return Kube(api)


def as_dict(obj: Any) -> dict[str, Any]:
    """An API object (typed model or dict) as Kubernetes JSON."""
    if isinstance(obj, dict):
        return obj
    json: dict[str, Any] = client.ApiClient().sanitize_for_serialization(obj)
    return json


def name_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
