"""`spd-lsp engine --ray`: the team engine on a Ray cluster, N replicas behind one TCP address.

Front ends set `engine` to `HOST:PORT` exactly as for a single engine; the token comes from
`--token-file`, else $SPD_LSP_TOKEN, else it is generated (`spd_lsp.auth`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from spd_lsp import auth
from spd_lsp.serve_command import configure_logging, is_loopback

log = logging.getLogger(__name__)

DEFAULT_PORT = 2088


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spd-lsp engine --ray", description=__doc__)
    parser.add_argument("--ray", action="store_true", required=True, help="serve through Ray Serve replicas")
    parser.add_argument("--address", help="a running Ray cluster (ray://HOST:PORT or auto); default: start one here")
    parser.add_argument("--replicas", type=int, default=1, help="replicas, each with its own model (default 1)")
    parser.add_argument("--max-replicas", type=int, help="autoscale up to this many replicas on queue length")
    parser.add_argument("--target-ongoing-requests", type=float, default=2.0,
                        help="autoscaling: running + queued requests per replica to aim for (default 2)")
    parser.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per replica (1: one model per GPU)")
    parser.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per replica (default 1)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--token-file", metavar="PATH", help=f"the team token (owner-only file; else ${auth.TOKEN_ENV})")
    parser.add_argument("--tls-cert", metavar="PEM", help="serve TLS with this certificate chain")
    parser.add_argument("--tls-key", metavar="PEM", help="... and this private key")
    parser.add_argument("--model", help="bundled default, a .gguf file, or a local Hugging Face directory")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--int8", action="store_true", help="dynamic int8 linear layers (CPU replicas)")
    parser.add_argument("--base-store", metavar="DIR", help="the team's base n-gram store, read-only on every replica")
    parser.add_argument("--log-file")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_file, args.log_level)
    if bool(args.tls_cert) != bool(args.tls_key):
        print("spd-lsp: error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        token = auth.load(token_file=args.token_file, environ=os.environ, port=args.port)
    except auth.TokenError as exc:
        print(f"spd-lsp: error: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(args.host) and not args.tls_cert:
        log.warning("binding %s without TLS: the token crosses the network unencrypted", args.host)
    try:
        asyncio.run(serve_forever(args, token.value))
    finally:
        token.discard()
    return 0


async def serve_forever(args: argparse.Namespace, token: str) -> None:
    import ray

    from spd_lsp.ray_serve.client import ServeEngine
    from spd_lsp.ray_serve.deployment import ServeSettings, deploy
    from spd_lsp.ray_serve.ingress import Ingress, tls_context
    from spd_lsp.ray_serve.replica import ModelSettings

    settings = ServeSettings(
        model=ModelSettings(model=args.model, device=args.device, dtype=args.dtype,
                            quantize="int8" if args.int8 else None, ngram_db=args.base_store),
        replicas=args.replicas, max_replicas=args.max_replicas, target_ongoing_requests=args.target_ongoing_requests,
        num_gpus=args.num_gpus, num_cpus=args.num_cpus,
    )
    ray.init(address=args.address, include_dashboard=False)
    handle = deploy(settings)
    info = {"model": args.model or "default", "ray": {"replicas": args.replicas, "max_replicas": args.max_replicas}}
    ingress = Ingress(ServeEngine(handle), token=token, info=info)
    tls = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    server = await ingress.start(args.host, args.port, tls=tls)
    log.info("serving %d replica(s) on %s:%d%s", args.replicas, args.host, args.port, " (TLS)" if tls else "")
    async with server:
        await server.serve_forever()
