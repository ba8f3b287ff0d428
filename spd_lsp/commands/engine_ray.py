"""`spd-lsp engine --ray --replicas N --tcp PORT ...`: the team engine on a Ray cluster.

Every flag of `spd-lsp engine` keeps its meaning (`--tcp`, `--host`, `--token-file`,
`--certfile`/`--keyfile`, the model's `--model`, `--device`, `--dtype`, `--quantize`, `--output-weights` and
`--fast-path`, `--base-store`, `--max-batch`, logging); the flags below choose the replicas. Front ends set
`engine` to the address exactly as for a single engine.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
import sys
from typing import Any

from spd_lsp import auth

log = logging.getLogger(__name__)


def ray_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spd-lsp engine --ray", description=__doc__.split("\n\n")[0], add_help=False)
    parser.add_argument("--ray", action="store_true", required=True, help="serve through Ray Serve replicas")
    parser.add_argument("--address", help="a running Ray cluster (auto, or ray://HOST:PORT); default: start one here")
    parser.add_argument("--replicas", type=int, default=1, help="replicas, each with its own model (default 1)")
    parser.add_argument("--max-replicas", type=int, help="autoscale up to this many replicas on queue length")
    parser.add_argument("--target-ongoing-requests", type=float, default=8.0,
                        help="autoscaling: running + queued requests per replica to aim for (default 8)")
    parser.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per replica (1: one model per GPU)")
    parser.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per replica (default 1)")
    return parser


def main(argv: list[str]) -> int:
    from spd_lsp.commands import engine as engine_command
    from spd_lsp.auth import is_loopback
    from spd_lsp.commands.logs import configure_logging

    ours, rest = ray_parser().parse_known_args(argv)
    args = engine_command.parse_args(rest)
    if args.tcp is None:
        print("spd-lsp engine --ray: error: give --tcp PORT (the ingress is a TCP engine)", file=sys.stderr)
        return 2
    try:
        settings = serve_settings(ours, args)
    except ValueError as exc:
        print(f"spd-lsp engine --ray: error: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_file, args.log_level)
    try:
        token = auth.load(token_file=args.token_file, environ=os.environ, port=args.tcp)
        tls = engine_command.tls_context(args)  # the engine's own reading of --certfile/--keyfile
    except (auth.TokenError, OSError, ssl.SSLError) as exc:
        print(f"spd-lsp engine: error: {exc}", file=sys.stderr)
        return 2
    log.info("engine clients must send the token %s", token.source)
    if not is_loopback(args.host) and tls is None:
        log.warning("binding %s without TLS: the token crosses the network unencrypted", args.host)
    try:
        asyncio.run(serve(ours, args, settings, token.value, tls))
    except KeyboardInterrupt:
        pass
    finally:
        token.discard()
    return 0


def serve_settings(ours: argparse.Namespace, args: argparse.Namespace) -> Any:
    from spd_lsp.commands.engine import model_spec
    from spd_lsp.remote.ray.deployment import ServeSettings
    from spd_lsp.remote.ray.replica import ReplicaSettings

    return ServeSettings(
        replica=ReplicaSettings(model=model_spec(args), base_store=str(args.base_store) if args.base_store else None,
                                max_batch=args.max_batch),
        replicas=ours.replicas, max_replicas=ours.max_replicas, target_ongoing_requests=ours.target_ongoing_requests,
        num_gpus=ours.num_gpus, num_cpus=ours.num_cpus,
    )


async def serve(ours: argparse.Namespace, args: argparse.Namespace, settings: Any, token: str,
                tls: ssl.SSLContext | None) -> None:
    import ray

    from spd_lsp.remote.server import Listener
    from spd_lsp.remote.ray.client import ServeEngine
    from spd_lsp.remote.ray.deployment import deploy
    from spd_lsp.remote.ray.ingress import RayIngress

    ray.init(address=ours.address, include_dashboard=False)
    engine = ServeEngine(deploy(settings))
    scaling = {"replicas": ours.replicas, "maxReplicas": ours.max_replicas or ours.replicas}
    ingress = RayIngress(engine, await engine.describe(), Listener(host=args.host, port=args.tcp, token=token, tls=tls),
                         deployment=scaling)
    await ingress.serve()
