"""Calling the deployment: an affinity key per request, cancellation, and failover.

A request whose replica dies (killed, out of memory, its node gone) is sent again, to
whichever replica the router now picks; after `attempts` it fails with `ReplicaUnavailable`,
which the ingress answers as an error (the front end then retries once, else answers an
empty list).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

from ray import exceptions as ray_errors
from ray import serve
from ray.serve.handle import DeploymentHandle

from spd_lsp.remote.ray.deployment import APP_NAME, DEPLOYMENT_NAME
from spd_lsp.remote.ray.replica import Answer

log = logging.getLogger(__name__)

# A replica that is gone or unreachable; anything else (a bad request) is not retried.
LOST = (ray_errors.ActorDiedError, ray_errors.ActorUnavailableError, ray_errors.RayActorError)
AFFINITY_HEAD_CHARS = 256  # a document's prompt keeps its head while its user types further down


def affinity_key(frame: dict[str, Any]) -> str:
    """The routing key of a `complete` frame: its `affinity` (the front end's document), else
    a digest of its prompt's head, so that prompts which start alike share a replica (and the
    prompt cache it keeps for that key)."""
    explicit = frame.get("affinity")
    if isinstance(explicit, str) and explicit:
        return explicit
    request = frame.get("request")
    prefix = request.get("prefix") if isinstance(request, dict) else None
    head = prefix[:AFFINITY_HEAD_CHARS] if isinstance(prefix, str) else ""
    return hashlib.blake2b(head.encode(), digest_size=12).hexdigest()


class ReplicaUnavailable(RuntimeError):
    """No replica answered the request within its attempts."""


class ServeEngine:
    def __init__(self, handle: DeploymentHandle | None = None, *, attempts: int = 3, timeout_s: float = 60.0):
        self.handle = handle or serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=APP_NAME)
        self.attempts = attempts
        self.timeout_s = timeout_s

    async def complete(self, frame: dict[str, Any]) -> Answer:
        """Decode a `complete` frame on the replica that owns its affinity key."""
        key = affinity_key(frame)
        problem: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            response = self.handle.options(method_name="complete", session_id=key).remote(frame)
            try:
                return await asyncio.wait_for(asyncio.shield(_awaited(response)), self.timeout_s)
            except LOST as exc:
                problem = exc
                log.warning("replica lost during request (attempt %d of %d): %s", attempt, self.attempts,
                            type(exc).__name__)
            except (asyncio.CancelledError, TimeoutError):
                response.cancel()  # reaches the replica, whose decode loop stops at its next step
                raise
        raise ReplicaUnavailable(f"no replica answered after {self.attempts} attempts: {problem}")

    async def describe(self) -> dict[str, Any]:
        """A replica's model description and tokenizer (`EngineReplica.describe`)."""
        return await _awaited(self.handle.options(method_name="describe").remote())


async def _awaited(response) -> Any:
    return await response
