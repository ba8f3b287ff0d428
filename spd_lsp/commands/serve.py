"""`spd-lsp [--stdio | --tcp]`: serve LSP. stdout belongs to the protocol alone."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from spd_lsp import __version__, auth
from spd_lsp.auth import is_loopback
from spd_lsp.commands.logs import configure_logging

log = logging.getLogger(__name__)

DEFAULT_PORT = 2087


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spd-lsp", description="Superposed Decoding completion language server.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    transport.add_argument("--tcp", action="store_true", help="serve over TCP")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help=f"TCP: the token clients send as initializationOptions.{auth.TOKEN_KEY} (an owner-only file; "
        f"else ${auth.TOKEN_ENV}; else one is generated into the user's runtime dir and its path logged)",
    )
    parser.add_argument(
        "--max-message-mb", type=float, default=64, help="skip (and log) LSP messages larger than this (default 64)"
    )
    parser.add_argument("--log-file", help="write the log here instead of stderr")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--version", action="version", version=f"spd-lsp {__version__}")
    # Clients add their own flags (e.g. --clientProcessId=N): ignore what we do not know.
    args, _unknown = parser.parse_known_args(argv)
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    configure_logging(args.log_file, args.log_level)
    if args.tcp:
        try:
            token = auth.load(token_file=args.token_file, environ=os.environ, port=args.port)
        except auth.TokenError as exc:
            print(f"spd-lsp: error: {exc}", file=sys.stderr)
            return 2
        log.info("TCP clients must send initializationOptions.%s: the token %s", auth.TOKEN_KEY, token.source)
        if not is_loopback(args.host):
            log.warning("binding %s: other machines can connect, and the token crosses the network unencrypted "
                        "(prefer an SSH tunnel to a loopback port)", args.host)
    from spd_lsp.commands.engine_setting import load_engine
    from spd_lsp.lsp.handlers import build_server

    server = build_server(load_engine, max_message_bytes=int(args.max_message_mb * 1024 * 1024))
    if args.tcp:
        try:
            server.start_tcp(args.host, args.port, token=token.value)
        finally:
            token.discard()
        return 0
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print (or a library's) must never corrupt the stream
    server.start_io(sys.stdin.buffer, protocol_out)
    return 0
