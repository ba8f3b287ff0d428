"""Several editor windows on one machine with default settings (`engine` "auto": one shared engine): memory, and a
typing storm.

Each window is a real `spd-lsp --stdio` (the bundled model unless `--model`), all sharing this run's own runtime
directory, so the first window starts this run's engine and the others connect to it; the engine is stopped at the end.

`--windows 1,2,4` (memory): windows are started one after another; once each has opened a document (~1,500 tokens of
this repository's sources, no workspace folder) and answered a request and a few typed characters, the RSS of every
process is read: the front ends (each without the model: no torch in its memory maps), the engine, and its standby
spare (a fork sharing the engine's pages: its RSS counts them again, so it is listed apart, and PSS, which splits shared
pages between the processes, is the total's other measure). The targets (issue 46): two windows <= 1.3x one window's
RSS (engine and front ends), four <= 1.5x, a front end <= 150 MB.

Both measures first wait (`--settle`) for the engine's background compile of its step and verification-tree graphs,
which the first requests start: that one-time cost (~130 MB of the bundled model's engine: dynamo's traces and
inductor's code) otherwise lands within the measure, as a second window's or a storm's growth.

`--storm S` (load): one window types into 2 documents, `--rate` requests/s each, every second request cancelled (the
next keystroke comes first), for S seconds, while a second window stays idle with its document open. The RSS of every
process is sampled every `--sample` seconds; then: every request answered (an answer or the cancel's error, none lost
or timed out), the RSS at the end against its value after the first minute (target: within 10 %), and a request in
each window after the storm, a new character typed (target: answered within 1 s).

    PYTHONPATH=. nice .venv/bin/python -m bench.bench_windows --windows 1,2,4
    PYTHONPATH=. nice .venv/bin/python -m bench.bench_windows --storm 180
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from bench.bench_server import Bench, Document, corpus, inline_params, position_at

TIMEOUT_S = 300


def memory(pid: int) -> dict[str, float]:
    """RSS and PSS in MB (PSS: shared pages split between the processes that map them)."""
    values = {"rss": float("nan"), "pss": float("nan")}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, *rest = line.split()
            if key in ("Rss:", "Pss:"):
                values[key[:-1].lower()] = int(rest[0]) / 1024
    except OSError:
        pass
    return values


def maps_torch(pid: int) -> bool:
    """Whether the process has torch's library mapped (a front end must not)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


async def drain(stream: asyncio.StreamReader, path: Path) -> None:
    with path.open("ab") as out:
        while chunk := await stream.read(1 << 16):
            out.write(chunk)


class Window:
    """One editor window: its own `spd-lsp --stdio`, default settings but `k`/`maxTokens`."""

    def __init__(self, env: dict[str, str], options: dict[str, Any]) -> None:
        self.env, self.options = env, options
        self.client = LanguageClient("spd-bench-window", "1")
        self.bench = Bench(self.client)
        self.pid = 0

    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=self.env)
        self.pid = self.client._server.pid
        # Its log (stderr), read as an editor reads it: unread, the pipe fills and the server blocks in a write
        # (a storm's "cancel for an unknown request" warnings filled it in a few minutes).
        log = Path(self.env["SPD_LSP_CACHE"]) / f"front-end-{self.pid}.log"
        self._drain = asyncio.create_task(drain(self.client._server.stderr, log))
        await self.client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(),
                                                                initialization_options=self.options))
        self.client.initialized(lsp.InitializedParams())
        deadline = time.monotonic() + TIMEOUT_S
        while not (await self.bench.command("spd.status"))["model"]:
            if time.monotonic() > deadline:
                raise TimeoutError("the model did not load")
            await asyncio.sleep(0.5)

    async def ask(self, document: Document, offset: int) -> float:
        """One request at `offset`, waited for: its keystroke -> answer in ms."""
        started = time.perf_counter()
        params = inline_params(document.uri, position_at(document.text, offset))
        await asyncio.wait_for(self.client.text_document_inline_completion_async(params), TIMEOUT_S)
        return 1000 * (time.perf_counter() - started)

    async def type(self, document: Document, offset: int, text: str) -> None:
        for i, char in enumerate(text):
            document.edit(offset + i, offset + i, char)
            await self.ask(document, offset + i + 1)

    async def status(self) -> dict[str, Any]:
        return await self.bench.command("spd.status")

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 30)
            self.client.exit(None)
        finally:
            await self.client.stop()


def environment() -> tuple[dict[str, str], str]:
    cache = tempfile.mkdtemp(prefix="spd-windows-")
    env = {**os.environ, "XDG_RUNTIME_DIR": cache, "SPD_LSP_CACHE": cache,
           "SPD_LSP_MODEL_CACHE": os.environ.get("SPD_LSP_MODEL_CACHE") or platformdirs.user_cache_dir("spd-lsp")}
    return env, cache


def documents(count: int, chars: int = 6000) -> list[tuple[str, int]]:
    """`count` texts of this repository's sources (about 1,500 tokens each) and where to type: their end."""
    text = corpus()
    step = len(text) // (count + 1)
    out = []
    for i in range(count):
        start = step * (i + 1)
        start = text.index("\n", start) + 1
        body = text[start : start + chars]
        body = body[: body.rindex("\n") + 1] + "    "
        out.append((body, len(body)))
    return out


async def processes(windows: list[Window], cache: str | None = None) -> dict[str, Any]:
    """Every process's memory: front ends, the engine (from a window's status) and its spare; given this run's
    runtime directory, what the engine's prompt caches and batch buffers hold."""
    fronts = [memory(w.pid) for w in windows]
    model = (await windows[0].status())["model"] or {}
    status = await asyncio.to_thread(engine_status, cache) if cache else {}
    scheduler, current = status.get("scheduler") or {}, status.get("model") or model
    engine_pid = model.get("pid")
    engine = memory(engine_pid) if engine_pid else {"rss": 0.0, "pss": 0.0}
    spares = [memory(p) for p in children(engine_pid)] if engine_pid else []
    return {
        "frontEnds": [round(f["rss"]) for f in fronts], "frontEndsPss": [round(f["pss"]) for f in fronts],
        "torchInFrontEnds": [maps_torch(w.pid) for w in windows], "engineKind": model.get("engineKind"),
        "enginePid": engine_pid, "engine": round(engine["rss"]), "enginePss": round(engine["pss"]),
        "spares": [round(s["rss"]) for s in spares], "sparesPss": [round(s["pss"]) for s in spares],
        "compileState": compile_state(status) if status else None,
        "compiled": bool(current.get("compiled")),
        "treeCompiled": bool((current.get("treeStep") or {}).get("compiled")),
        **({"promptCacheMB": round(scheduler.get("promptCacheBytes", 0) / 2**20),
            "batchCacheMB": round(scheduler.get("batchCacheBytes", 0) / 2**20),
            "promptCaches": scheduler.get("promptCaches")} if scheduler else {}),
        "rss": round(sum(f["rss"] for f in fronts) + engine["rss"]),
        "pss": round(sum(f["pss"] for f in fronts) + engine["pss"] + sum(s["pss"] for s in spares)),
    }


def engine_status(cache: str) -> dict[str, Any]:
    """The shared engine's own status (its model's compile state, its scheduler's prompt caches and batch buffers),
    asked over its socket in this run's runtime directory; {} where it does not answer. (A front end's `spd.status`
    shows the engine as its connection's hello found it: a compile finished since is not in it.)"""
    from spd_lsp.address import Address
    from spd_lsp.remote import protocol
    from spd_lsp.remote.client import Connection, EngineGone

    for sock in Path(cache).rglob("engine-*.sock"):
        try:
            connection = Connection(Address("unix", path=str(sock)))
        except (EngineGone, PermissionError):
            continue
        try:
            _, future = connection.request({"op": protocol.STATUS})
            return future.result(timeout=30).get("status", {})
        finally:
            connection.close()
    return {}


def compile_state(status: dict[str, Any]) -> str:
    model = status.get("model") or {}
    step, tree, padded = model, model.get("treeStep") or {}, model.get("paddedStep") or {}
    return ", ".join(f"{name} {part.get('compileState')} ({part.get('compiledShapes', 0)} shapes)"
                     for name, part in (("step", step), ("tree", tree), ("padded", padded)))


async def settle(cache: str, timeout: float) -> tuple[float, str]:
    """Wait (up to `timeout` s) until the engine's background compile is done: its verification-tree graph compiled (or
    the trees eager by the plan: beside the fused step) and no graph compiling (a request alone steps on the fused
    step, which needs none: the step's own graph may never be compiled). That graph's memory (dynamo's traces,
    inductor's code: ~130 MB of the bundled model's engine) is then in every later sample, not a step within a
    measure. Returns (seconds waited, the compile state)."""
    started = time.monotonic()
    while True:
        status = await asyncio.to_thread(engine_status, cache)
        model = status.get("model") or {}
        parts = [model, model.get("treeStep") or {}, model.get("paddedStep") or {}]
        tree_done = bool(parts[1].get("compiled")) or parts[1].get("compileState") == "eager"  # eager: no graph coming
        done = tree_done and not any(str(p.get("compileReason") or "").startswith("compiling") for p in parts)
        if done or time.monotonic() - started > timeout:
            return round(time.monotonic() - started), compile_state(status)
        await asyncio.sleep(5)


def stop_engine(pid: int | None) -> None:
    for target in ([*children(pid), pid] if pid else []):
        try:
            os.kill(target, signal.SIGTERM)
        except ProcessLookupError:
            pass


async def run_windows(args: argparse.Namespace) -> dict[str, Any]:
    env, cache = environment()
    counts = sorted({int(n) for n in args.windows.split(",")})
    texts = documents(max(counts))
    windows: list[Window] = []
    rows: dict[int, dict[str, Any]] = {}
    engine_pid = None
    settled: dict[str, Any] = {}
    try:
        for count in range(1, max(counts) + 1):
            window = Window(env, {"k": args.k, "maxTokens": args.max_tokens, **json.loads(args.settings)})
            await window.start()
            windows.append(window)
            text, offset = texts[count - 1]
            document = Document(window.bench, f"file:///bench/window{count}.py", text)
            await window.ask(document, offset)
            await window.type(document, offset, "return ")
            if count == 1 and args.settle:
                waited, compiled = await settle(cache, args.settle)
                print(f"the engine's compile settled after {waited} s: {compiled}", file=sys.stderr)
                settled = {"settleSeconds": waited, "compile": compiled}
            state = await processes(windows, cache)
            engine_pid = state["enginePid"] or engine_pid
            if count in counts:
                rows[count] = state
                print(f"{count} window(s): {state}", file=sys.stderr)
    finally:
        for window in windows:
            await window.stop()
        stop_engine(engine_pid)
    return {"windows": rows, **settled}


def windows_table(rows: dict[int, dict[str, Any]]) -> str:
    one = rows[min(rows)]
    lines = ["| windows | front ends RSS (MB) | torch in a front end | engine RSS | spare RSS (PSS) | RSS total | x one | PSS total | x one |",
             "| ---: | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for count, row in sorted(rows.items()):
        spare = ", ".join(f"{r} ({p})" for r, p in zip(row["spares"], row["sparesPss"])) or "none"
        lines.append(f"| {count} | {', '.join(map(str, row['frontEnds']))} | {'yes' if any(row['torchInFrontEnds']) else 'no'} | "
                     f"{row['engine']} | {spare} | {row['rss']} | {row['rss'] / one['rss']:.2f} | {row['pss']} | "
                     f"{row['pss'] / one['pss']:.2f} |")
    return "\n".join(lines)


async def run_storm(args: argparse.Namespace) -> dict[str, Any]:
    env, cache = environment()
    options = {"k": args.k, "maxTokens": args.max_tokens, **json.loads(args.settings)}
    typing, idle = Window(env, options), Window(env, options)
    texts = documents(3)
    engine_pid = None
    try:
        await typing.start()
        await idle.start()
        idle_doc = Document(idle.bench, "file:///bench/idle.py", texts[2][0])
        await idle.ask(idle_doc, texts[2][1])
        docs = [Document(typing.bench, f"file:///bench/storm{i}.py", texts[i][0]) for i in range(2)]
        cursors = [texts[i][1] for i in range(2)]
        for doc, cursor in zip(docs, cursors):
            await typing.ask(doc, cursor)
        engine_pid = (await typing.status())["model"].get("pid")
        settled: dict[str, Any] = {}
        if args.settle:
            waited, compiled = await settle(cache, args.settle)
            print(f"the engine's compile settled after {waited} s: {compiled}", file=sys.stderr)
            settled = {"settleSeconds": waited, "compileBefore": compiled}
        source = corpus()
        protocol = typing.client.protocol
        futures: list[asyncio.Future] = []
        cancelled = 0
        samples: list[tuple[float, dict[str, Any]]] = []
        started = time.perf_counter()
        sent = [0]

        async def sample() -> None:  # its own task: a slow sample (a loaded engine) never holds the keystrokes back
            while True:
                state = await processes([typing, idle], cache)
                samples.append((time.perf_counter() - started, state))
                print(f"{samples[-1][0]:.0f} s: RSS {state['rss']} MB (engine {state['engine']}: prompt caches "
                      f"{state.get('promptCaches')} holding {state.get('promptCacheMB')} MB, batch buffers "
                      f"{state.get('batchCacheMB')} MB; front ends {state['frontEnds']}), PSS {state['pss']} MB, "
                      f"{sent[0]} requests, compile: {state['compileState']}", file=sys.stderr)
                await asyncio.sleep(max(0.0, started + len(samples) * args.sample - time.perf_counter()))

        sampler = asyncio.create_task(sample())
        i = 0
        previous: list[tuple[str, bool] | None] = [None, None]  # each document's last request and whether to cancel it
        interval = 1.0 / (args.rate * len(docs))
        while time.perf_counter() - started < args.storm:
            await asyncio.sleep(max(0.0, started + i * interval - time.perf_counter()))
            which = i % len(docs)
            doc = docs[which]
            char = source[(i // len(docs)) % len(source)]
            char = " " if char == "\n" else char
            doc.edit(cursors[which], cursors[which], char)
            cursors[which] += 1
            last = previous[which]
            if last is not None and last[1]:  # every second request: the next keystroke cancels it
                protocol.notify("$/cancelRequest", lsp.CancelParams(id=last[0]))
                cancelled += 1
            msg_id = f"storm-{i}"
            params = inline_params(doc.uri, position_at(doc.text, cursors[which]))
            futures.append(protocol.send_request_async(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id))
            previous[which] = (msg_id, (i // len(docs)) % 2 == 0)
            i = sent[0] = i + 1
        storm_s = time.perf_counter() - started
        sampler.cancel()
        results = await asyncio.gather(*(asyncio.wait_for(f, TIMEOUT_S) for f in futures), return_exceptions=True)
        lost = [r for r in results if isinstance(r, asyncio.TimeoutError)]
        errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.TimeoutError)]
        drafts = sum(1 for r in results if not isinstance(r, BaseException) and r and r.items)
        final = await processes([typing, idle], cache)
        samples.append((time.perf_counter() - started, final))
        after = {}  # a new character in each window: a decoded request each (not typed through shown drafts)
        docs[0].edit(cursors[0], cursors[0], "x")
        after["typing window"] = await typing.ask(docs[0], cursors[0] + 1)
        phases = {"typing window": (await typing.status())["last"]}
        idle_doc.edit(texts[2][1], texts[2][1], "x")
        after["idle window"] = await idle.ask(idle_doc, texts[2][1] + 1)
        phases["idle window"] = (await idle.status())["last"]
        front_status = (await typing.status())
        settled["compileAfter"] = compile_state(await asyncio.to_thread(engine_status, cache))
    finally:
        for window in (typing, idle):
            await window.stop()
        stop_engine(engine_pid)
    minute = next((s for t, s in samples if t >= 60.0), samples[0][1])
    return {"seconds": round(storm_s, 1), "requests": len(results), "cancelsSent": cancelled, "withDrafts": drafts,
            "answeredEmptyOrCancelled": len(results) - drafts - len(errors) - len(lost), "cancelErrors": len(errors),
            "lost": len(lost), "rssAfterFirstMinute": minute["rss"], "rssEnd": final["rss"],
            "rssEndVsMinute": round(final["rss"] / minute["rss"], 3), "pssAfterFirstMinute": minute["pss"],
            "pssEnd": final["pss"], "afterStormMs": {k: round(v) for k, v in after.items()},
            "afterStormPhases": {k: {key: v.get(key) for key in ("source", "prefillMs", "prefillTokens", "queueMs",
                                                                  "modelMs", "verifyMs", "engineMs", "roundTripMs")}
                                 for k, v in phases.items() if v},
            "samples": [(round(t), s["rss"], s["pss"], s["engine"], s["frontEnds"], s.get("promptCacheMB"),
                         s.get("compiled")) for t, s in samples],
            "latencyMs": front_status.get("latencyMs"), "requestsCounted": front_status.get("requests"), **settled}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", metavar="N,M", help="memory with these numbers of windows (e.g. 1,2,4)")
    parser.add_argument("--storm", type=float, default=0, metavar="S", help="seconds of the typing storm")
    parser.add_argument("--rate", type=float, default=20, help="requests per second in each of the 2 documents")
    parser.add_argument("--sample", type=float, default=10, metavar="S", help="seconds between RSS samples")
    parser.add_argument("--settings", default="{}", help="more initializationOptions, JSON (default: none)")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--settle", type=float, default=900, metavar="S",
                        help="before measuring (the first window; the storm), wait up to S seconds for the engine's "
                             "background compile to finish (0: measure at once)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not args.windows and not args.storm:
        parser.error("give --windows and/or --storm")
    result: dict[str, Any] = {}
    if args.windows:
        result.update(asyncio.run(run_windows(args)))
        print(windows_table(result["windows"]))
    if args.storm:
        result["storm"] = storm = asyncio.run(run_storm(args))
        print("typing storm:", {k: v for k, v in storm.items() if k not in ("samples", "latencyMs")})
        print("RSS samples (s, RSS MB, PSS MB, engine MB, front ends MB, engine prompt caches MB, step compiled):",
              storm["samples"])
    print(f"load average now {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
