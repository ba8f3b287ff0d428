"""Calling the deployment: a document key for affinity, cancellation, and failover.

A request whose replica dies (killed, out of memory, its node gone) is sent again, to
whichever replica the router now picks; after `attempts` it fails with `ReplicaUnavailable`,
which the ingress answers as an error (the front end then answers an empty list).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from ray import exceptions as ray_errors
from ray import serve
from ray.serve.handle import DeploymentHandle

from spd_lsp.decoding.types import DecodeOptions
from spd_lsp.ray_serve.deployment import APP_NAME, DEPLOYMENT_NAME
from spd_lsp.ray_serve.replica import Answer

log = logging.getLogger(__name__)

# A replica that is gone or unreachable; anything else (a bad request) is not retried.
LOST = (ray_errors.ActorDiedError, ray_errors.ActorUnavailableError, ray_errors.RayActorError)


AFFINITY_HEAD_CHARS = 256  # a document's prompt keeps its head while its user types further down


def affinity_key(prefix: str, explicit: str | None = None) -> str:
    """The routing key of a request: the caller's (e.g. a document URI), else a digest of its prompt's head.

    Requests whose prompts start alike go to one replica, whose `ModelRunner` then reuses the
    shared part of its prompt KV cache.
    """
    if explicit:
        return explicit
    return hashlib.blake2b(prefix[:AFFINITY_HEAD_CHARS].encode(), digest_size=12).hexdigest()


class ReplicaUnavailable(RuntimeError):
    """No replica answered the request within its attempts."""


class ServeEngine:
    def __init__(self, handle: DeploymentHandle | None = None, *, attempts: int = 3, timeout_s: float = 60.0):
        self.handle = handle or serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=APP_NAME)
        self.attempts = attempts
        self.timeout_s = timeout_s

    async def complete(
        self, prefix: str, options: DecodeOptions, *, key: str, ids: list[int] | None = None, args: dict | None = None
    ) -> Answer:
        """Drafts for `prefix`, decoded on the replica that owns `key` (see `affinity_key`)."""
        problem: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            response = self.handle.options(method_name="complete", session_id=key).remote(prefix, options, ids=ids, args=args)
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


async def _awaited(response) -> Answer:
    return await response
