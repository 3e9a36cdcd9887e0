"""`check_capacity`: fail fast when the servers cannot hold a generation batch of sessions."""

from __future__ import annotations

import json
import urllib.request
from typing import Optional, Sequence

from .errors import CapacityError
from .urls import http_url, is_loopback, parse_urls, urls_from_env


def _get_json(url: str, timeout_s: float, headers: Optional[dict] = None) -> dict:
    handlers = [urllib.request.ProxyHandler({})] if is_loopback(url) else []
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, headers=dict(headers or {}))
    with opener.open(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def check_capacity(
    base_urls: str | Sequence[str] | None,
    generation_batch_size: int,
    *,
    timeout_s: float = 10.0,
    headers: Optional[dict] = None,
) -> dict:
    """Check that the servers can hold `generation_batch_size` concurrent sessions.

    TRL keeps one environment instance, hence one session, per rollout of a
    generation batch, all open at once: across every training process, that is
    `per_device_train_batch_size * steps_per_generation * num_processes`
    (or the eval batch, if larger). Each server's `/metadata` reports its
    `max_concurrent_envs` per worker process, its `workers`, and the most
    sessions one client address may hold per worker (`max_sessions_per_client`,
    0: no cap): a trainer is one address, so it counts the smaller. Sessions
    already opened by other clients are not counted.

    Returns `{"replicas", "max_concurrent_envs" (sessions per URL, all workers), "workers" (per URL),
    "capacity" (what this client may hold), "generation_batch_size"}`.

    Raises:
        CapacityError: a ValueError, when the total capacity < generation_batch_size.
        ConnectionError: when a server does not answer or does not report its capacity.
    """
    urls = parse_urls(base_urls if base_urls is not None else urls_from_env())
    per_url, workers, capped = [], [], []
    for url in urls:
        try:
            meta = _get_json(f"{http_url(url)}/metadata", timeout_s, headers)
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"could not read {http_url(url)}/metadata: {exc}") from exc
        value = meta.get("max_concurrent_envs") if isinstance(meta, dict) else None
        count = meta.get("workers", 1) if isinstance(meta, dict) else None  # older servers: one process
        if not _positive_int(value) or not _positive_int(count):
            raise ConnectionError(
                f"{http_url(url)}/metadata does not report max_concurrent_envs and workers "
                "(is it a ReleaseOps Arena server?)"
            )
        share = meta.get("max_sessions_per_client") or 0  # older servers: no per-address cap
        if _positive_int(share) and share < value:
            capped.append(f"{http_url(url)} lets one address hold {share} of {value} per worker")
            value = share
        per_url.append(value * count)
        workers.append(count)
    capacity = sum(per_url)
    n = len(urls)
    shapes = [f"{w} worker{'s' if w > 1 else ''} x {c // w}" if w > 1 else str(c) for c, w in zip(per_url, workers)]
    if len(set(shapes)) == 1:
        breakdown = f"{n} replica{'s' if n > 1 else ''} x {shapes[0]}"
    else:
        breakdown = f"{n} replicas: {' + '.join(shapes)}"
    if capacity < generation_batch_size:
        if capped:  # the per-address share binds: the operator's setting for a trainer behind one address
            raise CapacityError(
                f"server capacity for one client address is {capacity} ({breakdown}; {'; '.join(capped)}), below the "
                f"generation batch size {generation_batch_size}; start the servers with MAX_SESSIONS_PER_CLIENT=0 "
                "(no per-address cap) or a larger value, or add replicas or workers"
            )
        raise CapacityError(
            f"server capacity {capacity} ({breakdown}) is below the generation batch size "
            f"{generation_batch_size}; raise MAX_CONCURRENT_ENVS or add replicas or workers"
        )
    return {
        "replicas": n,
        "max_concurrent_envs": dict(zip(urls, per_url)),
        "workers": dict(zip(urls, workers)),
        "capacity": capacity,
        "generation_batch_size": generation_batch_size,
    }


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
