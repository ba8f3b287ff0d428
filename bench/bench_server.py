"""Request latency of `spd-lsp --stdio` as an editor sees it, and the server's memory.

Starts the real server (default model) on a workspace (a copy of this
repository's Python sources by default, indexed into a throw-away store first), then measures
`textDocument/inlineCompletion` round trips for a ~1,500-token prefix:

- cold: a new document each time (no reusable KV cache);
- warm: one document, typed one character at a time (didChange + request);
  "warm, decoded" are the requests among them where the typed character did not
  follow a draft already shown (the others are answered without the model).

Each round trip is split with the server's own timings (`spd.status` -> last):
prefill, decode (model forward steps), n-gram lookups, the rest of the engine
(healing, draft bookkeeping), the session (context, tokenizer, cut/de-dup) and
the server (JSON-RPC, queueing, event loop) = client latency - session total.

`--replay N` instead replays N keystrokes of typing into the middle of a real file
(the project's sources, ~5,000 lines, cursor near line 4,000): characters typed,
backspaces, cursor jumps to another line and back, and accepts (the shown top draft
where it matches what the author wrote). Each keystroke waits for its answer;
keystroke -> answer is reported split into type-through / reused cache (<= 32
prompt tokens re-prefilled) / cold, with the share of each. `--storm S` types at
`--rate` characters/s for S seconds without waiting, cancelling the previous request
as an editor does, and counts drafts delivered per second.

    .venv/bin/python bench/bench_server.py [--cold 5] [--warm 30] [--max-prefix-tokens 2048]
    nice .venv/bin/python bench/bench_server.py --replay 300 --storm 30
    PYTHONPATH=. .venv/bin/python -m bench.bench_server --cold 8 --warm 0 --max-prefix-tokens 512 --wait-compiled 600

`--wait-compiled S` first sends warm-up requests until the server's step and verification tree run compiled graphs
(at most S seconds), as after a while of use; without it the first requests run eager steps.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300  # one request; a dead server fails the run instead of hanging it


def copy_sources(target: Path) -> Path:
    """A quiet workspace: the project's Python files (the live checkout churns with builds)."""
    for package in ("spd_lsp", "ngram_db", "tests", "bench"):
        for path in (REPO / package).rglob("*.py"):
            destination = target / path.relative_to(REPO)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    return target


def corpus() -> str:
    """Real code to complete: the project's own sources, in a stable order."""
    files = sorted((REPO / "spd_lsp").rglob("*.py")) + sorted((REPO / "ngram_db").rglob("*.py"))
    return "\n".join(path.read_text() for path in files)


def prefixes(text: str, tokens: int, count: int, tokenizer: Any) -> list[str]:
    """`count` different windows of about `tokens` tokens, each ending mid-line after some code."""
    offsets = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
    step = max(1, (len(offsets) - tokens) // max(count, 1))
    windows = []
    for i in range(count):
        start, end = offsets[i * step][0], offsets[min(i * step + tokens, len(offsets)) - 1][1]
        window = text[start:end]
        cut = window.rfind("\n", 0, len(window) - 1)
        line = window[cut + 1 :]
        windows.append(window[: cut + 1 + max(1, len(line) // 2)])  # stop halfway through a line
    return windows


def end_position(text: str) -> lsp.Position:
    return position_at(text, len(text))


def position_at(text: str, offset: int) -> lsp.Position:
    line_start = text.rfind("\n", 0, offset) + 1
    return lsp.Position(text.count("\n", 0, offset), len(text[line_start:offset].encode("utf-16-le")) // 2)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Bench:
    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.rows: dict[str, list[dict[str, float]]] = {"cold": [], "warm": [], "warm, decoded": []}

    async def command(self, name: str) -> Any:
        request = self.client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=name))
        return await asyncio.wait_for(request, TIMEOUT_S)

    async def request(self, kind: str, uri: str, position: lsp.Position) -> int:
        params = lsp.InlineCompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            position=position,
            context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic),
        )
        started = time.perf_counter()
        result = await asyncio.wait_for(self.client.text_document_inline_completion_async(params), TIMEOUT_S)
        client_ms = 1000 * (time.perf_counter() - started)
        last = (await self.command("spd.status"))["last"]
        sample = {
            "client": client_ms,
            "prefill": last["prefillMs"],
            "decode": last["modelMs"],
            "ngram": last["ngramMs"],
            "engine_other": last["engineMs"] - last["prefillMs"] - last["modelMs"] - last["ngramMs"],
            "session": last["totalMs"] - last["engineMs"],
            "server": client_ms - last["totalMs"],
            "prefill_tokens": last["prefillTokens"],
            "reused_tokens": last["reusedTokens"],
            "steps": last["steps"],
        }
        self.rows[kind].append(sample)
        if kind == "warm" and last["source"] == "model":
            self.rows["warm, decoded"].append(sample)  # the typed character did not follow a shown draft
        return len(result.items) if result else 0

    def open(self, uri: str, text: str) -> None:
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )

    def type_char(self, uri: str, version: int, position: lsp.Position, char: str) -> None:
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangePartial(range=lsp.Range(position, position), text=char)],
            )
        )


class Document:
    """An open document the bench edits the way an editor does: ranged didChange, versioned."""

    def __init__(self, bench: Bench, uri: str, text: str) -> None:
        self.bench, self.uri, self.text, self.version = bench, uri, text, 1
        bench.open(uri, text)

    def edit(self, start: int, end: int, new: str) -> None:
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(position_at(self.text, start), position_at(self.text, end)), text=new
        )
        self.version += 1
        self.text = self.text[:start] + new + self.text[end:]
        self.bench.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=[change],
            )
        )


def inline_params(uri: str, position: lsp.Position) -> lsp.InlineCompletionParams:
    return lsp.InlineCompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri),
        position=position,
        context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic),
    )


REPLAY_KINDS = ("type-through", "reused cache", "cold")


async def replay(bench: Bench, text: str, keystrokes: int, seed: int, *, suffix: str = "empty") -> list[dict[str, Any]]:
    """Type `keystrokes` edits into the middle of `text`, waiting for each answer.

    The text to type is cut out of the file and typed back. `suffix="empty"`: the cut ends at a
    line end, so the cursor's line has nothing after the cursor (as when writing new lines);
    "unrelated": it ends mid-line, so the cursor's line ends with the rest of a later line
    (the replay of earlier rounds, where the accept-safety fit drops most drafts)."""
    rng = random.Random(seed)
    lines = text.split("\n")
    cursor = len("\n".join(lines[: min(4000, len(lines) * 4 // 5)])) + 1
    end = cursor + 4 * keystrokes
    if suffix == "empty":
        end = text.find("\n", end) if "\n" in text[end:] else len(text)
    to_type = text[cursor:end]
    document = Document(bench, "file:///bench/replay.py", text[:cursor] + text[cursor + len(to_type) :])
    samples: list[dict[str, Any]] = []
    typed, shown = 0, ""  # characters of to_type in the document; the top draft shown last

    async def ask(action: str, offset: int) -> None:
        nonlocal shown
        started = time.perf_counter()
        params = inline_params(document.uri, position_at(document.text, offset))
        result = await asyncio.wait_for(bench.client.text_document_inline_completion_async(params), TIMEOUT_S)
        ms = 1000 * (time.perf_counter() - started)
        last = (await bench.command("spd.status"))["last"]
        kind = "type-through" if last["source"] == "typedThrough" else "reused cache"
        kind = "cold" if kind != "type-through" and last["prefillTokens"] > 32 else kind
        items = result.items if result else []
        line_start = document.text.rfind("\n", 0, offset) + 1
        shown = items[0].insert_text[offset - line_start :] if items else ""
        samples.append({"action": action, "kind": kind, "ms": ms, "drafts": len(items), "prefill": last["prefillTokens"],
                        **({"phases": phases(ms, last)} if last["source"] == "model" else {})})

    while len(samples) < keystrokes and typed < len(to_type) - 8:
        here = cursor + typed
        roll = rng.random()
        accepted = 0
        upcoming = to_type[typed:].split("\n", 1)[0]
        while accepted < min(len(shown), len(upcoming)) and shown[accepted] == upcoming[accepted]:
            accepted += 1
        if accepted >= 4 and roll < 0.5:
            document.edit(here, here, to_type[typed : typed + accepted])
            typed += accepted
            await ask("accept", here + accepted)
        elif roll < 0.05 and typed >= 3:
            count = rng.randint(1, 3)
            document.edit(here - count, here, "")
            typed -= count
            await ask("backspace", here - count)
        elif roll < 0.07:
            await ask("jump away", document.text.find("\n", rng.randrange(0, cursor)))  # a line's end
            await ask("jump back", here)
        else:
            document.edit(here, here, to_type[typed])
            typed += 1
            await ask("type", here + 1)
    return samples


PHASES = ("front end", "socket", "engine I/O", "queue", "prefill", "steps", "verification", "answer")


def phases(client_ms: float, last: dict[str, Any]) -> dict[str, float]:
    """A decoded keystroke's time, phase by phase, from the server's own timings (`spd.status` -> last): the front end
    (JSON-RPC, the session, the client's own wait: keystroke -> answer minus the engine's round trip), the socket (the
    round trip minus the engine's time from frame read to answer written), the engine's I/O (that time minus its model
    thread's), its queue, prefill, decode steps, verification, and the answer (the rest of the model thread's time:
    n-grams, healing, drafts). In process the engine is `LocalEngine.complete`: socket and I/O are 0."""
    engine = last["engineMs"]
    round_trip = last.get("roundTripMs") or engine
    served = last.get("servedMs") or engine
    queue = last.get("queueMs") or 0.0
    prefill = last["prefillMs"]
    return {
        "front end": client_ms - round_trip,
        "socket": round_trip - served,
        "engine I/O": served - engine,
        "queue": queue,
        "prefill": prefill,
        "steps": last["modelMs"],
        "verification": last["verifyMs"],
        "answer": engine - queue - prefill - last["modelMs"] - last["verifyMs"],
    }


def phase_table(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Decoded keystrokes' phases (p50 of each, and the mean), one column per engine setting."""
    names = list(runs)
    lines = ["| decoded keystroke, phase | " + " | ".join(f"{n} p50 | {n} mean" for n in names) + " |",
             "| --- |" + " ---: | ---: |" * len(names)]
    decoded = {n: [s for s in samples if "phases" in s] for n, samples in runs.items()}
    for phase in (*PHASES, "keystroke -> answer"):
        cells = []
        for n in names:
            values = [s["ms"] if phase == "keystroke -> answer" else s["phases"][phase] for s in decoded[n]]
            cells.append(f"{percentile(values, 0.5):.1f} | {sum(values) / len(values):.1f}" if values else "- | -")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(runs: dict[str, list[dict[str, Any]]], base: str) -> list[str]:
    """Decoded keystroke p50 and p95 of each engine setting against `base`'s, on the same replay (the target:
    "auto" <= 1.05x in process)."""
    def decoded(samples: list[dict[str, Any]]) -> list[float]:
        return [s["ms"] for s in samples if s["kind"] != "type-through"]

    lines = []
    reference = decoded(runs[base])
    for name, samples in runs.items():
        if name != base and reference and decoded(samples):
            got = decoded(samples)
            lines.append(f"decoded keystroke {name} / {base}: p50 {percentile(got, 0.5):.0f} / "
                         f"{percentile(reference, 0.5):.0f} ms = {percentile(got, 0.5) / percentile(reference, 0.5):.2f}x, "
                         f"p95 {percentile(got, 0.95):.0f} / {percentile(reference, 0.95):.0f} ms = "
                         f"{percentile(got, 0.95) / percentile(reference, 0.95):.2f}x (target <= 1.05x)")
    return lines


def replay_table(samples: list[dict[str, Any]]) -> str:
    lines = [
        "| keystroke -> answer | n | share | p50 | p95 | re-prefilled tokens p50 | with drafts |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind in ("all", *REPLAY_KINDS):
        rows = [s for s in samples if kind in ("all", s["kind"])]
        if rows:
            ms = [s["ms"] for s in rows]
            lines.append(
                f"| {kind} | {len(rows)} | {len(rows) / len(samples):.0%} | {percentile(ms, 0.5):.0f} ms | "
                f"{percentile(ms, 0.95):.0f} ms | {percentile([s['prefill'] for s in rows], 0.5):.0f} | "
                f"{sum(s['drafts'] > 0 for s in rows) / len(rows):.0%} |"
            )
    decoded = [s["ms"] for s in samples if s["kind"] != "type-through"]
    if decoded:
        lines.append(f"| decoded (reused + cold) | {len(decoded)} | {len(decoded) / len(samples):.0%} | "
                     f"{percentile(decoded, 0.5):.0f} ms | {percentile(decoded, 0.95):.0f} ms | | |")
    return "\n".join(lines)


async def storm(bench: Bench, text: str, seconds: float, rate: float) -> dict[str, Any]:
    """Type at `rate` characters/s without waiting; each keystroke cancels the previous request."""
    cursor = len("\n".join(text.split("\n")[:3000])) + 1
    to_type = text[cursor : cursor + int(seconds * rate) + 1]
    document = Document(bench, "file:///bench/storm.py", text[:cursor] + text[cursor + len(to_type) :])
    protocol = bench.client.protocol
    outstanding: list[tuple[str, asyncio.Future[Any]]] = []
    started = time.perf_counter()
    for i, char in enumerate(to_type):
        await asyncio.sleep(max(0.0, started + i / rate - time.perf_counter()))
        document.edit(cursor + i, cursor + i, char)
        if outstanding:
            protocol.notify("$/cancelRequest", lsp.CancelParams(id=outstanding[-1][0]))
        msg_id = f"storm-{i}"
        params = inline_params(document.uri, position_at(document.text, cursor + i + 1))
        future = protocol.send_request_async(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)
        outstanding.append((msg_id, future))
    typing_s = time.perf_counter() - started
    results = await asyncio.gather(*(asyncio.wait_for(f, TIMEOUT_S) for _, f in outstanding), return_exceptions=True)
    drafts = sum(1 for r in results if not isinstance(r, BaseException) and r and r.items)
    cancelled = sum(1 for r in results if isinstance(r, BaseException))
    return {"requests": len(results), "with drafts": drafts, "cancelled": cancelled, "seconds": typing_s,
            "drafts per second": drafts / typing_s}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


COLUMNS = (  # (header, sample key, percentile, format)
    ("latency p50", "client", 0.50, "{:.0f} ms"),
    ("latency p95", "client", 0.95, "{:.0f} ms"),
    ("prefill p50", "prefill", 0.50, "{:.0f} ms"),
    ("decode p50", "decode", 0.50, "{:.0f} ms"),
    ("n-gram p50", "ngram", 0.50, "{:.1f} ms"),
    ("engine other p50", "engine_other", 0.50, "{:.0f} ms"),
    ("session p50", "session", 0.50, "{:.0f} ms"),
    ("server p50", "server", 0.50, "{:.0f} ms"),
    ("prefilled tokens p50", "prefill_tokens", 0.50, "{:.0f}"),
    ("decode steps p50", "steps", 0.50, "{:.0f}"),
)


def table(rows: dict[str, list[dict[str, float]]]) -> str:
    lines = [
        "| requests | n | " + " | ".join(header for header, *_ in COLUMNS) + " |",
        "| --- | ---: |" + " ---: |" * len(COLUMNS),
    ]
    for kind, samples in rows.items():
        if samples:
            cells = [fmt.format(percentile([s[key] for s in samples], q)) for _, key, q, fmt in COLUMNS]
            lines.append(f"| {kind} | {len(samples)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def wait_indexed(bench: Bench, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = await bench.command("spd.status")
        if status["model"] and status["stores"] and not any(s["indexing"] for s in status["stores"]):
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"server not ready after {timeout} s: {status}")
        await asyncio.sleep(0.5)


async def wait_compiled(bench: Bench, texts: list[str], timeout: float) -> bool:
    """Warm-up requests (new documents of `texts`) until the server's decode step and verification tree run compiled
    graphs (`spd.status`: model.compiled, model.treeStep), as a server that has run a while has them (the tree's
    compile starts once a request's drafts made a tree its graph takes); a step the fused step serves
    (`model.fastPlan`'s step "fused", applied) needs no graph. False where there is no fast path or `timeout` came
    first."""
    deadline = time.monotonic() + timeout
    for i in itertools.count():
        model = (await bench.command("spd.status"))["model"] or {}  # the fast path's own status, at its top
        if not model.get("fastPath"):
            return False
        fused = (model.get("fastPlan") or {}).get("engines", {}).get("step") == "fused"
        if ((model.get("compiled") or (fused and model.get("fastPlanState") == "applied"))
                and (model.get("treeStep") or {}).get("compiled")):
            return True
        if time.monotonic() > deadline:
            return False
        text = texts[i % len(texts)]
        bench.open(f"file:///bench/compile{i}.py", text)
        await bench.request("cold", f"file:///bench/compile{i}.py", end_position(text))
        await asyncio.sleep(2.0)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from spd_lsp.engine.model import load_tokenizer

    tokenizer = load_tokenizer(args.model)
    text = corpus()
    cold_prefixes = prefixes(text, args.prefix_tokens, args.cold + 1, tokenizer)
    cache = tempfile.mkdtemp(prefix="spd-bench-")
    root = args.root or copy_sources(Path(cache) / "workspace")
    env = {
        **os.environ,
        "XDG_RUNTIME_DIR": cache,  # engine "auto": this run's own engine daemon, stopped at the end
        "SPD_LSP_CACHE": cache,  # a fresh store; the model cache stays shared
        "SPD_LSP_MODEL_CACHE": os.environ.get("SPD_LSP_MODEL_CACHE") or platformdirs.user_cache_dir("spd-lsp"),
    }
    client = LanguageClient("spd-bench", "1")
    log = ["--log-file", str(args.server_log)] if args.server_log else []
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", *log, env=env)
    pid = client._server.pid  # the server subprocess pygls started
    options: dict[str, Any] = {"k": args.k, "maxTokens": args.max_tokens}
    if args.max_prefix_tokens:
        options["maxPrefixTokens"] = args.max_prefix_tokens
    if args.quantize:
        options["quantize"] = args.quantize
    if args.model:
        options["model"] = args.model
    if args.device:
        options["device"] = args.device
    if args.engine:
        options["engine"] = args.engine
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )
    client.initialized(lsp.InitializedParams())
    bench = Bench(client)
    await wait_indexed(bench, 600)
    bench.open("file:///bench/warmup.py", cold_prefixes[-1])
    await bench.request("cold", "file:///bench/warmup.py", end_position(cold_prefixes[-1]))  # torch warm-up
    extra: dict[str, Any] = {}
    if args.wait_compiled:
        started = time.monotonic()
        warmups = prefixes(text[len(text) // 2 :], args.prefix_tokens, 8, tokenizer)
        extra["compiled"] = await wait_compiled(bench, warmups, args.wait_compiled)
        print(f"graphs compiled: {extra['compiled']} after {time.monotonic() - started:.0f} s", file=sys.stderr)
    bench.rows["cold"].clear()
    if args.replay:
        extra["replay"] = await replay(bench, text, args.replay, args.seed, suffix=args.replay_suffix)
    if args.storm:
        extra["storm"] = await storm(bench, text, args.storm, args.rate)

    for i, prefix in enumerate(cold_prefixes[: args.cold]):  # none where --cold 0
        uri = f"file:///bench/cold{i}.py"
        bench.open(uri, prefix)
        await bench.request("cold", uri, end_position(prefix))

    prefix = cold_prefixes[0]
    typed = text[text.index(prefix) + len(prefix) :][: args.warm]  # what the author wrote next
    uri = "file:///bench/warm.py"
    bench.open(uri, prefix)
    position = end_position(prefix)
    await bench.request("cold", uri, position)  # the document's first request is cold
    for version, char in enumerate(typed, start=2):
        bench.type_char(uri, version, position, char)
        position = end_position(prefix + typed[: version - 1])
        await bench.request("warm", uri, position)

    final = await bench.command("spd.status")
    memory = rss_mb(pid)
    engine_pid = (final["model"] or {}).get("pid")
    engine_status = engine_scheduler(final["engine"].get("address")) if final["engine"].get("address") else None
    if engine_pid:  # a shared engine: its memory counts too; it goes with the run
        memory += rss_mb(engine_pid)
        os.kill(engine_pid, signal.SIGTERM)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {
        "rows": bench.rows,
        "rss_mb": memory,
        "model": final["model"],
        "stores": final["stores"],
        "settings": options,
        "engineScheduler": engine_status,
        **extra,
    }


def engine_scheduler(address: str) -> dict[str, Any] | None:
    """A shared engine's scheduler status (its counts, and its requests' queue time by what the model thread did)."""
    from spd_lsp.address import parse
    from spd_lsp.remote import protocol
    from spd_lsp.remote.client import Connection

    try:
        connection = Connection(parse(address))
        try:
            _, future = connection.request({"op": protocol.STATUS})
            return future.result(timeout=30)["status"]["scheduler"]
        finally:
            connection.close()
    except Exception as exc:  # noqa: BLE001 - a figure less, not a failed run
        print(f"engine status: {exc}", file=sys.stderr)
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="workspace folder to index (default: a copy of this repo's sources)")
    parser.add_argument("--cold", type=int, default=5, help="cold requests (new documents)")
    parser.add_argument("--wait-compiled", type=float, default=0, metavar="S",
                        help="first, up to S seconds of warm-up requests until the step and tree graphs are compiled")
    parser.add_argument("--warm", type=int, default=30, help="warm requests (typed characters)")
    parser.add_argument("--prefix-tokens", type=int, default=1500)
    parser.add_argument("--max-prefix-tokens", type=int, default=None, help="server budget (default: its own)")
    parser.add_argument("--quantize", choices=["int8"], help="the server's `quantize` setting")
    parser.add_argument("--model", help="the server's `model` setting (default: the bundled model)")
    parser.add_argument("--device", help="the server's `device` setting (default: its own, auto)")
    parser.add_argument("--engine", help="the server's `engine` setting (in-process, auto, an address; default: its own)")
    parser.add_argument("--engines", metavar="A,B", help="one run per `engine` setting, in this order, on the same replay "
                        "(same seed): each decoded keystroke's phases side by side, and each setting's p50/p95 against "
                        "the first's (e.g. in-process,auto)")
    parser.add_argument("--replay", type=int, default=0, metavar="N", help="keystrokes of the typing replay")
    parser.add_argument("--rounds", type=int, default=1, help="with --engines: rounds, the order reversed every other")
    parser.add_argument("--replay-suffix", choices=("empty", "unrelated"), default="empty",
                        help="the cursor line's text after the cursor during the replay (see replay())")
    parser.add_argument("--storm", type=float, default=0, metavar="S", help="seconds of typing without waiting")
    parser.add_argument("--rate", type=float, default=20, help="characters per second in the storm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the raw samples here")
    parser.add_argument("--server-log", type=Path, help="the server's --log-file")
    args = parser.parse_args()
    if args.engines:
        return compare_engines(args)
    result = asyncio.run(run(args))
    model = result["model"]
    print(f"model: {model['name']} on {model['device']} ({model['dtype']}), settings {result['settings']}")
    print(f"store: {result['stores']}")
    print(table(result["rows"]))
    if "replay" in result:
        print(replay_table(result["replay"]))
    if "storm" in result:
        print("typing storm:", {k: round(v, 2) if isinstance(v, float) else v for k, v in result["storm"].items()})
    print(f"server RSS after the run: {result['rss_mb']:.0f} MB; load average now {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def compare_engines(args: argparse.Namespace) -> int:
    """`--engines`: the same run once per engine setting (`--rounds` times, the order reversed every other round: A B,
    B A, ...); the replay's phases and ratios against the first setting, pooled and per round."""
    engines = args.engines.split(",")
    runs: dict[str, dict[str, Any]] = {}
    rounds: list[dict[str, list[dict[str, Any]]]] = []
    for number in range(args.rounds):
        this: dict[str, list[dict[str, Any]]] = {}
        for engine in engines if number % 2 == 0 else engines[::-1]:
            args.engine = engine
            result = asyncio.run(run(args))
            print(f"round {number + 1}, {engine}: RSS {result['rss_mb']:.0f} MB (engine and front end); "
                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)
            this[engine] = result.get("replay", [])
            if engine in runs:  # pooled: every round's samples
                runs[engine]["replay"] = runs[engine].get("replay", []) + this[engine]
            else:
                runs[engine] = result
        rounds.append({engine: this[engine] for engine in engines})
    first = engines[0]
    model = runs[first]["model"]
    print(f"model: {model['name']} on {model['device']} ({model['dtype']}), settings {runs[first]['settings']}, "
          f"replay {args.replay} keystrokes, seed {args.seed}")
    for engine, result in runs.items():
        print(f"\n{engine} (RSS after the run {result['rss_mb']:.0f} MB):")
        if "replay" in result:
            print(replay_table(result["replay"]))
    replays = {engine: result["replay"] for engine, result in runs.items() if "replay" in result}
    if replays:
        print()
        print(phase_table(replays))
        print()
        print("\n".join(compare(replays, first)))
        if len(rounds) > 1:
            for number, replayed in enumerate(rounds, start=1):
                print(f"round {number}: " + "; ".join(compare(replayed, first)))
    for engine, result in runs.items():
        if result.get("engineScheduler"):
            print(f"{engine}: the engine's scheduler: {result['engineScheduler']}")
    print(f"load average now {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
