"""`spd.status` at a glance: where the engine runs, and the status as readable lines.

Plain values in, plain values out: `engine_link` describes the `engine` setting and the
engine's connection; `summary` turns the status object (`Session.status`) into the text
the editors show as is (`:SpdStatus`, the VS Code output channel).
"""

from __future__ import annotations

from typing import Any

from spd_lsp.address import AUTO, IN_PROCESS, parse


def engine_kind(setting: str | None) -> str:
    """Which engine serves the `engine` setting: "in-process", "shared" (this machine's, over a Unix socket:
    "auto", the default, or unix:) or "remote" (TCP/TLS)."""
    if setting in (None, IN_PROCESS):
        return "in-process"
    return "shared" if setting == AUTO or parse(setting).kind == "unix" else "remote"


def engine_link(setting: str, engine: Any) -> dict[str, Any]:
    """kind (`engine_kind`), address, the engine's pid (None in process, or before it answered), whether it is
    connected now (None in process) and the requests it answered empty."""
    if setting == IN_PROCESS:
        return {"kind": "in-process", "address": None, "pid": None, "connected": None, "failures": 0}
    link = engine.link() if hasattr(engine, "link") else {}  # not loaded (yet), or a test's double
    return {
        "kind": engine_kind(setting),
        "address": link.get("address") or (None if setting == AUTO else str(parse(setting))),
        "pid": (link.get("engineInfo") or {}).get("pid"),
        "connected": link.get("connected"),
        "failures": link.get("failures", 0),
    }


def model_info(info: dict[str, Any], engine: Any) -> dict[str, Any]:
    """The model's info as loaded, updated with what the engine it reached last says of itself (its
    pid, its model): a shared engine may have been replaced since the load; `engineKind`, which engine
    serves it (`engine_kind` of the setting it was loaded with, `info["engine"]`)."""
    link = engine.link() if hasattr(engine, "link") else {}  # (test doubles may have none)
    return {**info, **(link.get("engineInfo") or {}), "engineKind": engine_kind(info.get("engine"))}


def summary(status: dict[str, Any]) -> str:
    """The status in a few labelled lines, the most telling first."""
    rows = [
        ("Model", _model(status)),
        ("Engine", _engine(status.get("engine"))),
        *(("Store", _store(store)) for store in status.get("stores") or []),
        ("Last", _last(status.get("last"), status.get("lastDecoded"))),
        ("Latency", _latency(status)),
        ("Drafts", _drafts(status.get("drafts") or {})),
        ("Requests", _requests(status)),
        ("State", _state(status.get("state"))),
    ]
    if not status.get("stores"):
        rows.insert(2, ("Store", "none (no workspace folder, or n-grams off)"))
    width = max(len(label) for label, _ in rows) + 1
    return "\n".join(f"{label + ':':<{width}} {text}" for label, text in rows)


def _model(status: dict[str, Any]) -> str:
    model = status.get("model")
    if not model:
        return f"not loaded: {status['error']}" if status.get("error") else "not loaded yet"
    where = ", ".join(str(model[key]) for key in ("device", "dtype") if model.get(key))
    cache = f"; {model['modelCache']}" if model.get("modelCache") else ""
    return f"{model.get('name', '?')} on {where or '?'}, {_mode(model)}{cache}"


def _mode(model: dict[str, Any]) -> str:
    """compiled (torch.compile), served by another path (the fused step), or eager, and why, from the engine's info."""
    if model.get("compiled"):
        return "compiled"
    reason = model.get("compileReason")
    if model.get("compileState") == "otherwise":  # no graph needed: e.g. the fused step serves
        return str(reason or "served without a graph")
    return f"eager ({reason})" if reason else "eager"


def _engine(link: dict[str, Any] | None) -> str:
    if not link or link.get("kind") == "in-process":
        return "in-process (the model runs in this server)"
    address = link.get("address") or "the per-user socket"
    state = {True: "connected", False: "NOT CONNECTED", None: "not connected yet"}[link.get("connected")]
    failures = link.get("failures") or 0
    lost = f"; {failures} request(s) got no answer from it" if failures else ""
    pid = f", engine pid {link['pid']}" if link.get("pid") else ""
    what = "shared (one model for every window)" if link["kind"] == "shared" else link["kind"]
    return f"{what}{pid}, {address} ({state}{lost})"


def _store(store: dict[str, Any]) -> str:
    flags = [flag for flag, on in (("indexing", store.get("indexing")), ("watching", store.get("watching"))) if on]
    return (f"{store.get('root')}: {_int(store.get('files'))} files, {_int(store.get('tokens'))} tokens, "
            f"{_int(store.get('ngrams'))} n-grams, {_bytes(store.get('bytes'))}" + (f" ({', '.join(flags)})" if flags else ""))


def _last(last: dict[str, Any] | None, decoded: dict[str, Any] | None) -> str:
    """The newest decode's phases; and whether newer answers came from the shown drafts."""
    if not last:
        return "no request yet"
    if not decoded:
        return f"{_ms(last.get('totalMs'))} (typed through the shown drafts, no model call)"
    since = "" if last.get("source") == "model" else " (newer answers: typed through, no model call)"
    return (f"{_ms(decoded.get('totalMs'))}: prefill {_ms(decoded.get('prefillMs'))} ({_int(decoded.get('prefillTokens'))} "
            f"tokens), {_int(decoded.get('steps'))} steps {_ms(decoded.get('modelMs'))}, n-grams "
            f"{_ms(decoded.get('ngramMs'))}, verify {_ms(decoded.get('verifyMs'))}{since}")


def _latency(status: dict[str, Any]) -> str:
    total = (status.get("latencyMs") or {}).get("total") or {}
    if total.get("p50") is None:
        return "no request yet"
    return f"p50 {_ms(total['p50'])}, p95 {_ms(total.get('p95'))} (recent requests)"


def _drafts(drafts: dict[str, Any]) -> str:
    """Accepted of shown by rank (of offered, from a client that sends no `didShowCompletion`), partial
    accepts beside them."""
    offered, shown, accepted, partly = (drafts.get(key) or [] for key in ("offered", "shown", "accepted", "partlyAccepted"))
    if not any((offered, shown, accepted, partly)):
        return "none offered yet"
    base, label = (shown, "shown") if any(shown) else (offered, "offered")
    ranks = range(max(len(offered), len(shown), len(accepted), len(partly)))
    parts = []
    for rank in ranks:
        of, taken, part = _at(base, rank), _at(accepted, rank), _at(partly, rank)
        rate = f" ({100 * taken / of:.0f}%)" if of else ""
        parts.append(f"#{rank + 1} {taken}/{of}{rate}" + (f" +{part} partly" if part else ""))
    text = f"accepted/{label} by rank: " + ", ".join(parts)
    return text + ("; offered " + ", ".join(str(_at(offered, rank)) for rank in ranks) if label == "shown" else "")


def _at(counts: list[int], rank: int) -> int:
    return counts[rank] if rank < len(counts) else 0


def _state(state: dict[str, Any] | None) -> str:
    if not state:
        return "?"
    label = {"warming": "warming up"}.get(state.get("state"), state.get("state"))
    message = state.get("message")
    return f"{label}" + (f" ({message})" if message and message != label else "")


def _requests(status: dict[str, Any]) -> str:
    counts = ", ".join(f"{_int(status.get(key))} {label}" for key, label in (
        ("answered", "answered"), ("cancelled", "cancelled"), ("typedThrough", "typed through"), ("failed", "failed")))
    failures = status.get("failures") or {}
    kinds = f" [{', '.join(f'{kind} x{n}' for kind, n in failures.items())}]" if failures else ""
    return f"{_int(status.get('requests'))} ({counts}){kinds}"


def _int(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _ms(value: Any) -> str:
    return f"{value:.0f} ms" if isinstance(value, (int, float)) else "?"


def _bytes(value: Any) -> str:
    if not isinstance(value, int):
        return "? bytes"
    if value < 1024:
        return f"{value} bytes"
    size, unit = float(value), "bytes"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024:
            break
    return f"{size:.1f} {unit}"
