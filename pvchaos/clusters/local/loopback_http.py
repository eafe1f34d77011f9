"""One GET against a component on loopback, for health and version checks: the
components serve self-signed certificates, so verification is off (nothing leaves the
machine), and an HTTP error status is an answer, not an exception."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request


def get(url: str, token: str | None = None, timeout: float = 2.0) -> tuple[int, str]:
    """(status, body) of a GET, with the bearer token when given."""
    status, body = get_bytes(url, token, timeout)
    return status, body.decode(errors="replace")


def get_bytes(url: str, token: str | None = None, timeout: float = 2.0) -> tuple[int, bytes]:
    """(status, raw body) of a GET: for binary answers such as Go profiles."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
