"""Where the front end finds its engine: the `engine` setting, parsed (plain values only; spd_lsp/remote reaches
the engine at it, spd_lsp/settings.py checks the setting with it)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

AUTO, IN_PROCESS = "auto", "in-process"


@dataclass(frozen=True)
class Address:
    kind: str  # "unix", "tcp" or "tls"
    path: str = ""  # unix
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        return f"unix:{self.path}" if self.kind == "unix" else f"{self.kind}://{self.host}:{self.port}"


def parse(value: str) -> Address:
    """`unix:/path`, `tcp://host:port` or `tls://host:port` (ValueError otherwise)."""
    if value.startswith("unix:"):
        path = value.removeprefix("unix:")
        if not path.startswith("/"):
            raise ValueError("a unix: address needs an absolute socket path")
        return Address("unix", path=path)
    parts = urlsplit(value)
    if parts.scheme not in ("tcp", "tls") or not parts.hostname:
        raise ValueError("expected 'auto', 'in-process', unix:/path, tcp://host:port or tls://host:port")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port in {value!r}") from exc
    if port is None:
        raise ValueError(f"{value!r} needs a port")
    return Address(parts.scheme, host=parts.hostname, port=port)


def check_setting(value: object) -> str:
    """The `engine` setting's validation (settings.py)."""
    if value in (AUTO, IN_PROCESS):
        return value  # type: ignore[return-value]
    if not isinstance(value, str):
        raise ValueError("expected a string")
    parse(value)
    return value
