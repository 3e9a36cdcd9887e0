"""Server base URLs: parsing, `RELEASEOPS_ENV_URL`, replicas behind one DNS name, and round-robin."""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import threading
from typing import Sequence
from urllib.parse import urlsplit

ENV_URL_VAR = "RELEASEOPS_ENV_URL"


def parse_urls(base_urls: str | Sequence[str]) -> tuple[str, ...]:
    """One URL, a comma-separated string or a list, as normalised base URLs (no trailing slash)."""
    items = base_urls.split(",") if isinstance(base_urls, str) else list(base_urls)
    urls = tuple(u.strip().rstrip("/") for u in items if u and u.strip())
    if not urls:
        raise ValueError(f"no server URL given (pass base URLs or set {ENV_URL_VAR})")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
            raise ValueError(f"not a server base URL: {url!r} (expected e.g. http://127.0.0.1:8000)")
    return urls


def urls_from_env() -> tuple[str, ...]:
    value = os.environ.get(ENV_URL_VAR, "")
    if not value.strip():
        raise ValueError(
            f"set {ENV_URL_VAR} (comma-separated for several replicas), "
            "or build instances with make_remote_env_factory(base_urls)"
        )
    return parse_urls(value)


def urls_from_dns(host: str, port: int = 8000, scheme: str = "http") -> tuple[str, ...]:
    """One base URL per address `host` resolves to, sorted: the replicas behind a headless
    Kubernetes Service (deploy/kubernetes/service.yaml), each reached directly so that a
    WebSocket session stays on the replica that holds it."""
    if scheme not in ("http", "https"):
        raise ValueError(f"scheme must be http or https, not {scheme!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConnectionError(f"could not resolve {host!r}: {exc}") from exc
    addresses = sorted({info[4][0] for info in infos})
    return tuple(f"{scheme}://[{a}]:{port}" if ":" in a else f"{scheme}://{a}:{port}" for a in addresses)


def http_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return parts._replace(scheme=scheme).geturl().rstrip("/")


def is_loopback(url: str) -> bool:
    """Whether `url` names this machine (then no proxy from the environment is used)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RoundRobin:
    """Thread-safe rotation over a fixed tuple of URLs.

    Picklable: only the URLs travel; an unpickled rotation gets a new lock and starts again
    at the first URL (a lock cannot be pickled, and pickling `itertools.count` is deprecated).
    """

    def __init__(self, urls: tuple[str, ...]):
        self.urls = urls
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            return self.urls[next(self._counter) % len(self.urls)]

    def __getstate__(self) -> dict:
        return {"urls": self.urls}

    def __setstate__(self, state: dict) -> None:
        self.__init__(tuple(state["urls"]))


_ENV_ROTATIONS: dict[tuple[str, ...], RoundRobin] = {}
_ENV_ROTATIONS_LOCK = threading.Lock()


def next_env_url() -> str:
    """The next URL of `RELEASEOPS_ENV_URL`, round-robin across every instance of this process."""
    urls = urls_from_env()
    with _ENV_ROTATIONS_LOCK:
        rotation = _ENV_ROTATIONS.setdefault(urls, RoundRobin(urls))
    return rotation.next()
