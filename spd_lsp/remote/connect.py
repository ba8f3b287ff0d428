"""`commands.engine_setting.load_engine` for the `engine` setting's other values: a `RemoteEngine` with the engine's
own tokenizer, reached over the per-user daemon ("auto") or an address."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from spd_lsp import auth
from spd_lsp.api import Loaded
from spd_lsp.remote import daemon, protocol
from spd_lsp.remote import tokenizer as tokenizer_wire
from spd_lsp.address import AUTO, Address, parse
from spd_lsp.remote.client import Connection, EngineGone, EngineStarting, RemoteEngine


HELLO_ATTEMPTS = 3  # hellos to an engine that was just (re)started, before the request answers nothing
HELLO_BACKOFF_S = 0.5
RECONNECT_WAIT_S = 2.0  # after the first load: a request waits this long for a (re)starting engine, then
# answers no drafts; the engine goes on loading and the next keystroke connects once it answers


def load_remote(settings: Any) -> Loaded:
    """A `Loaded` whose engine is a `RemoteEngine`."""
    if settings.engine == AUTO:
        flags = daemon.model_args(settings.model_spec())

        def connect(*, restart: bool = False, wait: float = RECONNECT_WAIT_S) -> Connection:
            attempts = HELLO_ATTEMPTS if restart else 1
            for attempt in range(1, attempts + 1):
                try:
                    sock = daemon.ensure(flags, start_timeout=wait, standby=settings.engine_standby)
                except TimeoutError as exc:  # loading still: this request answers nothing, the next one may not
                    raise EngineStarting(str(exc)) from exc
                except (RuntimeError, OSError) as exc:  # it could not start: the request answers nothing
                    raise EngineGone(str(exc)) from exc
                try:
                    return Connection(Address("unix", path=str(sock)))
                except EngineGone:
                    # An engine started a moment ago on a starved machine may drop the first hello
                    # (its event loop late past the hello timeout): part of restarting, not a retry.
                    if attempt == attempts:
                        raise
                    time.sleep(HELLO_BACKOFF_S * attempt)
            raise EngineGone("no engine answered")
    else:
        address = parse(settings.engine)
        token = _token(settings) if address.kind != "unix" else None

        def connect(*, restart: bool = False, wait: float = RECONNECT_WAIT_S) -> Connection:
            return Connection(address, token=token, cafile=settings.engine_certificate)

    connection = connect(wait=daemon.START_TIMEOUT_S)  # the first load: the session is loading, not typing
    try:
        _, future = connection.request({"op": protocol.TOKENIZER})
        reply = future.result(timeout=60)
        tokenizer = tokenizer_wire.from_wire(reply["tokenizer"])
    except BaseException:
        connection.close()
        raise
    local = settings.engine == AUTO or settings.engine.startswith("unix:")
    engine = RemoteEngine(connect, tokenizer, local=local, connection=connection, affinity=f"{os.getpid()}")
    info = {**connection.info, "engine": settings.engine if settings.engine == AUTO else str(parse(settings.engine))}
    device = str(connection.info.get("device", "cpu"))
    return Loaded(engine, info, device.split(":")[0])


def _token(settings: Any) -> str:
    if settings.engine_token_file:
        return auth.read_file(Path(settings.engine_token_file))
    token = os.environ.get(auth.TOKEN_ENV)
    if not token:
        raise auth.TokenError(f"a TCP engine needs a token: set engineTokenFile or ${auth.TOKEN_ENV}")
    return token
