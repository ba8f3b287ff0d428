"""The Serve application: N engine replicas behind a prefix-affinity router.

- One model per replica: `num_gpus=1` puts each on its own GPU; otherwise CPU replicas.
- Prefix affinity: requests carry their document key as Serve's `session_id`, and Ray's
  consistent-hash router sends a key to the same replica (the one holding that document's
  prompt cache) while the replica set is unchanged; a busy or dead owner falls back to the
  next replica on the ring, so a key moves only when its replica goes.
- Autoscaling on queue length when `max_replicas` exceeds `replicas`: Serve adds replicas
  while the ongoing (running + queued) requests per replica exceed `target_ongoing_requests`.
- A dead replica is replaced by the Serve controller; the client (`client.py`) retries the
  request it lost on another one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ray import serve
from ray.serve.config import RequestRouterConfig

from spd_lsp.remote.ray.replica import EngineReplica, ReplicaSettings

APP_NAME = "spd-lsp"
DEPLOYMENT_NAME = "engine"
ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"


@dataclass(frozen=True)
class ServeSettings:
    replica: ReplicaSettings = field(default_factory=ReplicaSettings)
    replicas: int = 1  # the fixed count, or the autoscaling floor when max_replicas is larger
    max_replicas: int | None = None  # autoscale between `replicas` and this on queue length
    target_ongoing_requests: float = 8.0  # running + queued per replica; a replica batches up to replica.max_batch
    num_gpus: float = 0.0  # per replica: 1 = one model per GPU
    num_cpus: float = 1.0  # per replica (CPU replicas decode on this many threads)
    max_ongoing_requests: int | None = None  # per replica (default replica.max_batch); past it the router
    # spills a key to the next replica on the ring
    fallback_replicas: int = 1  # ring successors tried when the owner is full or gone
    health_check_period_s: float = 10.0

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {self.replicas}")
        if self.max_replicas is not None and self.max_replicas < self.replicas:
            raise ValueError(f"max_replicas ({self.max_replicas}) is below replicas ({self.replicas})")


def deployment_options(settings: ServeSettings) -> dict[str, Any]:
    scaling: dict[str, Any] = {"num_replicas": settings.replicas}
    if settings.max_replicas is not None and settings.max_replicas > settings.replicas:
        scaling = {"autoscaling_config": {
            "min_replicas": settings.replicas,
            "initial_replicas": settings.replicas,
            "max_replicas": settings.max_replicas,
            "target_ongoing_requests": settings.target_ongoing_requests,
        }}
    return {
        **scaling,
        "name": DEPLOYMENT_NAME,
        "ray_actor_options": {"num_cpus": settings.num_cpus, "num_gpus": settings.num_gpus},
        "max_ongoing_requests": settings.max_ongoing_requests or settings.replica.max_batch,
        "health_check_period_s": settings.health_check_period_s,
        "request_router_config": RequestRouterConfig(
            request_router_class=ROUTER,
            request_router_kwargs={"num_fallback_replicas": settings.fallback_replicas},
        ),
    }


def application(settings: ServeSettings) -> serve.Application:
    replica = settings.replica
    if settings.num_gpus > 0 and replica.model.device == "auto":
        replica = replace(replica, model=replace(replica.model, device="cuda"))  # never a silent CPU fallback on a GPU box
    return serve.deployment(EngineReplica).options(**deployment_options(settings)).bind(replica)


def deploy(settings: ServeSettings) -> serve.handle.DeploymentHandle:
    """Deploy on the connected Ray cluster (no HTTP proxy: the TCP ingress is the way in); returns when running."""
    serve.start(proxy_location="Disabled")
    return serve.run(application(settings), name=APP_NAME, route_prefix=None)
