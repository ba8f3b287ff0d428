"""Who may talk to a TCP server: the holder of a shared token.

The token comes from `--token-file PATH` (owner-only, like an SSH key), else the
`SPD_LSP_TOKEN` environment variable, else it is generated (`secrets.token_urlsafe(32)`)
into an owner-only file in the user's runtime directory. A client proves it holds the
token in its first message, an `initialize` request with `initializationOptions.token`:
editors can send that without custom code. Plain values only: no pygls, no sockets.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

TOKEN_ENV = "SPD_LSP_TOKEN"
TOKEN_KEY = "token"  # in initializationOptions
AUTH_FAILED = -32001  # JSON-RPC server error range: "authentication failed"
MIN_CHARS = 16


class TokenError(Exception):
    """A token source that cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)  # a token printed by accident shows nothing
    source: str  # for the log, never the value
    written: Path | None = None  # the generated file, removed when the server stops

    def discard(self) -> None:
        if self.written is not None:
            self.written.unlink(missing_ok=True)


def load(*, token_file: str | None, environ: Mapping[str, str], port: int) -> Token:
    """The server's token: from the file, else the environment, else a new one written for the client."""
    if token_file is not None:
        return Token(read_file(Path(token_file)), source=f"--token-file {token_file}")
    if TOKEN_ENV in environ:
        return Token(_checked(environ[TOKEN_ENV], f"${TOKEN_ENV}"), source=f"${TOKEN_ENV}")
    return generate(Path(platformdirs.user_runtime_dir("spd-lsp")) / f"tcp-{port}.token")


def read_file(path: Path) -> str:
    try:
        info = path.stat()
        if info.st_uid != os.getuid():
            raise TokenError(f"token file {path} is owned by uid {info.st_uid}, not by you")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise TokenError(f"token file {path} is open to others (mode {mode:04o}): run chmod 600 {path}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"cannot read token file {path}: {exc}") from exc
    return _checked(text.strip(), f"token file {path}")


def _checked(token: str, where: str) -> str:
    if not token:
        raise TokenError(f"{where} is empty")
    if len(token) < MIN_CHARS:
        raise TokenError(f"{where}: a token needs at least {MIN_CHARS} characters (try: python -c "
                         f"'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def generate(path: Path) -> Token:
    """A new random token in an owner-only file (written whole, then renamed into place)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".token-")  # mode 0600
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(token + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        hint = f"pass --token-file or ${TOKEN_ENV}"
        raise TokenError(f"cannot write a token file in {path.parent}: {exc}; {hint}") from exc
    return Token(token, source=f"generated into {path}", written=path)


def check(message: Any, token: str) -> str | None:
    """Why `message` does not admit its sender (never naming the expected token); None when it does."""
    if not (isinstance(message, dict) and message.get("method") == "initialize" and "id" in message):
        return f"the first message must be an initialize request with initializationOptions.{TOKEN_KEY}"
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.get(TOKEN_KEY) if isinstance(options, dict) else None
    if given is None:
        return f"no token: send it as initializationOptions.{TOKEN_KEY} (see --token-file, ${TOKEN_ENV})"
    if not isinstance(given, str):
        return f"initializationOptions.{TOKEN_KEY} must be a string, not {type(given).__name__}"
    if not hmac.compare_digest(given.encode(), token.encode()):
        return "wrong token"
    return None


def admitted(message: dict[str, Any]) -> dict[str, Any]:
    """An admitted `initialize` request, its token removed before anything structures or logs it."""
    params = message["params"]
    return {**message, "params": {**params, "initializationOptions": without_token(params["initializationOptions"])}}


def without_token(options: Any) -> Any:
    """initializationOptions minus the token: no setting, and never logged."""
    if isinstance(options, dict) and TOKEN_KEY in options:
        return {key: value for key, value in options.items() if key != TOKEN_KEY}
    return options


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
