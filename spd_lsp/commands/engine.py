"""`spd-lsp engine`: serve the engine (the model, once) to front ends and a team.

Without --tcp it listens on a Unix socket (owner-only; by default the per-user one the
front ends' "auto" setting finds). With --tcp PORT it binds loopback unless --host is
given, requires the token (--token-file, else $SPD_LSP_TOKEN, else a generated one in the
runtime dir) and speaks TLS when given --certfile/--keyfile.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import ssl
import sys
import threading
from pathlib import Path

from spd_lsp import auth
from spd_lsp.api import Loaded, ModelSpec
from spd_lsp.commands import malloc
from spd_lsp.commands.flags import add_settings, settings_of
from spd_lsp.engine.decoding.threads import release_openmp
from spd_lsp.engine.memory import give_back
from spd_lsp.settings import MODEL_KEYS
from spd_lsp.engine.model import ModelLoadError
from spd_lsp.remote import daemon, peers
from spd_lsp.remote.server import EngineServer, Listener
from spd_lsp.remote.standby import Turn

log = logging.getLogger(__name__)
TAKEOVER_COMPILE_DELAY_S = 30.0  # a spare that took over compiles its step this long after (see main)
LOADER_ENV = "SPD_LSP_ENGINE_LOADER"  # "module:function(spec: api.ModelSpec) -> api.Loaded" (tests, benchmarks)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spd-lsp engine", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--socket", type=Path, help="Unix socket to listen on (default: the per-user one)")
    where.add_argument("--tcp", type=int, metavar="PORT", help="serve TCP on PORT (0: any free port, printed)")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address to bind (default: loopback only)")
    parser.add_argument("--token-file", metavar="PATH", help=f"TCP token file (owner-only; else ${auth.TOKEN_ENV})")
    parser.add_argument("--certfile", help="TLS certificate (PEM); with --keyfile")
    parser.add_argument("--keyfile", help="TLS private key (PEM)")
    add_settings(parser, only=MODEL_KEYS, title="model")  # --model, --device, --dtype, --quantize, --output-weights, ...
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help="exit after this many seconds without a connection (default: never for TCP, "
                        f"{daemon.IDLE_TIMEOUT_S:.0f} for the Unix socket; 0 = never)")
    parser.add_argument("--peer-limit", type=int, default=peers.FAILURES, metavar="N",
                        help=f"TCP: an address failing N handshakes within {peers.WINDOW_S:.0f} s has its new connections "
                        f"closed at accept for {peers.BACKOFF_S:.0f} s (0: no limit)")
    parser.add_argument("--base-store", type=Path, help="TCP: the team's base n-gram store, read-only")
    parser.add_argument("--max-batch", type=int, default=32, help="superposed requests decoded together")
    parser.add_argument("--standby", action="store_true",
                        help="Unix socket: keep a spare (a fork, sharing the weights) that takes the socket over "
                        "if this engine dies (not on CUDA)")
    parser.add_argument("--log-file")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    if (args.certfile is None) != (args.keyfile is None):
        parser.error("--certfile and --keyfile go together")
    if args.tcp is None and (args.certfile or args.token_file):
        parser.error("--certfile and --token-file are for --tcp")
    if args.tcp is not None and args.standby:
        parser.error("--standby is for a Unix socket")
    try:
        model_spec(args)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def model_spec(args: argparse.Namespace) -> ModelSpec:
    """The model the parsed flags name (the settings' own checks: `commands/flags.py`)."""
    settings, warnings = settings_of(args)
    if warnings:
        raise ValueError("; ".join(warnings))
    return settings.model_spec()


def load(spec: ModelSpec) -> Loaded:
    loader = os.environ.get(LOADER_ENV)
    if loader:
        module, _, name = loader.partition(":")
        return getattr(importlib.import_module(module), name)(spec)
    from spd_lsp.engine.loading import load_local

    return load_local(spec)


def main(argv: list[str]) -> int:
    from spd_lsp.auth import is_loopback
    from spd_lsp.commands.logs import configure_logging

    args = parse_args(argv)
    configure_logging(args.log_file, args.log_level)
    malloc.tune(mmap_threshold=malloc.MMAP_THRESHOLD, trim_threshold=malloc.TRIM_THRESHOLD)  # bounded under load
    spec = model_spec(args)
    token = None
    listener = Listener()
    try:
        if args.tcp is not None:
            token = auth.load(token_file=args.token_file, environ=os.environ, port=args.tcp)
            log.info("engine clients must send the token %s", token.source)
            listener = Listener(host=args.host, port=args.tcp, token=token.value, tls=tls_context(args))
            if not is_loopback(args.host) and listener.tls is None:
                log.warning("binding %s without TLS: the token crosses the network unencrypted", args.host)
        else:
            listener = Listener(socket_path=args.socket or daemon.paths_for(daemon.model_args(spec)).socket)
        if args.standby:  # no compile thread may run while the spare is forked (remote/standby.py)
            from spd_lsp.engine.fast.compile import hold_background

            hold_background()
        loaded = load(spec)
    except (auth.TokenError, OSError, ssl.SSLError, ModelLoadError) as exc:
        print(f"spd-lsp engine: error: {exc}", file=sys.stderr)
        return 2
    give_back()  # the model load's float32 staging: ~20 MB less RSS
    turn = None
    if listener.socket_path is not None:
        # Nor while our kernel library builds (a first start): the spare would get the build's locks without its
        # thread, no library, and a self-test on torch's kernels beside the first requests. That engine serves
        # without a spare; the next one forks.
        building = loaded.info.get("fastPlanState") == "pending"
        wanted = args.standby and loaded.device_type != "cuda" and not building
        if args.standby and not wanted:
            log.info("no standby engine: %s", "the kernel library is still building" if building
                     else "a CUDA context does not survive a fork")
        turn = Turn.take(listener.socket_path, standby=wanted, self_test=lambda: _self_test(loaded),
                         before_fork=release_openmp)
    if args.standby:
        from spd_lsp.engine.fast.compile import release_background

        # The spare is forked: this engine's step may compile now. A spare that took over first serves the front
        # ends reconnecting at once, eager, without a compile thread taking its CPU and GIL (10 kills: drafts again
        # 5.1-7.6 s with the compile released at once; docs/faults.md).
        delay = TAKEOVER_COMPILE_DELAY_S if turn is not None and turn.took_over else 0.0
        timer = threading.Timer(delay, release_background)
        timer.daemon = True
        timer.start()
    idle = args.idle_timeout if args.idle_timeout is not None else (None if args.tcp is not None else daemon.IDLE_TIMEOUT_S)
    info = loaded.info  # the model's own dict, kept current (a background compile that finishes says so)
    info["pid"] = os.getpid()
    server = EngineServer(loaded.engine, info, listener, idle_timeout=idle or None, base_store=args.base_store,
                          max_batch=args.max_batch, standby=turn, peer_limit=args.peer_limit)
    try:
        asyncio.run(server.serve())
    except KeyboardInterrupt:
        pass
    finally:
        if turn is not None:
            turn.close()
        if token is not None:
            token.discard()
    if turn is not None and turn.took_over:
        # A fork's copies of the exit handlers (inductor's compile workers are the parent's) may wait on
        # what it does not own: done, skip them.
        logging.shutdown()
        os._exit(0)
    return 0


def _self_test(loaded: Loaded) -> None:
    """A spare's first decode, right after the fork: one that hangs there (as forks did before `release_openmp`)
    is ended by `Turn.take`'s alarm rather than found broken at the takeover."""
    from spd_lsp.api import DecodeOptions, DecodeRequest

    loaded.engine.complete(DecodeRequest("def f():\n    return", options=DecodeOptions(k=2, max_tokens=2)))


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    if args.certfile is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.certfile, args.keyfile)
    return context
