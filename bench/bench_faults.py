"""Hostile LSP input against real `spd-lsp --stdio` servers: deaths and unanswered requests.

1. framing: every bad-frame case against a fresh server (then a probe request);
2. hostile messages against one long-lived server: wrong types, huge, negative and
   fractional positions, UTF-16 surrogate splits, 5 MB documents, unknown URIs, bad
   settings, bad envelopes, random garbage bytes; each request must be answered
   (a result or an error) and the server must live;
3. a typing storm: a didChange and an inlineCompletion every 1/rate s for `--storm-s`
   seconds, every other request cancelled at once: answered / cancelled / unanswered
   and the server's RSS growth.

Loopback only (stdio pipes). The bundled model is used unless `--model` says otherwise.

    nice -n 10 .venv/bin/python -m bench.bench_faults [--rounds 12] [--storm-s 60] [--rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.bench_server import rss_mb
from bench.isolation import isolated_env
from spd_lsp.lsp.framing import FrameReader, encode

ANSWER_S = 60.0  # a request unanswered after this long counts as unanswered
DOC = "file:///bench/hostile.py"
PROGRAM = "import os\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        path = os.path.join(root, na"


class Server:
    """A server subprocess; answers are matched to requests by id."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.errors: Counter[int] = Counter()
        self.reader = asyncio.create_task(self._read())
        self.next_id = 0

    @classmethod
    async def start(cls, tmp: Path, *, env: dict[str, str] | None = None) -> Server:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "spd_lsp.cli", "--stdio", "--log-level", "ERROR",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=env or isolated_env(tmp),
        )
        return cls(process)

    async def _read(self) -> None:
        frames = FrameReader(lambda: self.process.stdout.read(1 << 16))
        while (frame := await frames.next()) is not None:
            message = frame.message
            if isinstance(message, dict) and "id" in message and "method" not in message:
                if "error" in message:
                    self.errors[message["error"]["code"]] += 1
                if (future := self.pending.pop(message["id"], None)) is not None and not future.done():
                    future.set_result(message)

    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)

    def notify(self, method: str, params: Any) -> None:
        self.write(encode({"jsonrpc": "2.0", "method": method, "params": params}))

    def request(self, method: str, params: Any, **envelope: Any) -> tuple[Any, asyncio.Future[dict[str, Any]]]:
        self.next_id += 1
        msg_id = f"r{self.next_id}"
        future = self.pending[msg_id] = asyncio.get_running_loop().create_future()
        self.write(encode({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params, **envelope}))
        return msg_id, future

    async def answered(self, future: asyncio.Future[dict[str, Any]]) -> bool:
        try:
            await asyncio.wait_for(asyncio.shield(future), ANSWER_S)
            return True
        except TimeoutError:
            return False

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    def rss_mb(self) -> float:
        return rss_mb(self.process.pid)

    async def initialize(self, options: dict[str, Any]) -> None:
        _, future = self.request("initialize", {"capabilities": {}, "initializationOptions": options})
        assert await self.answered(future), "initialize unanswered"
        self.notify("initialized", {})

    async def stop(self) -> int | None:
        if self.alive:
            _, future = self.request("shutdown", None)
            await self.answered(future)
            self.notify("exit", None)
            try:
                await asyncio.wait_for(self.process.wait(), 30)
            except TimeoutError:
                self.process.kill()
        self.reader.cancel()
        return self.process.returncode


def status_request(msg_id: str) -> bytes:
    """The body of a status request with non-ASCII text (10 characters, 20 UTF-8 bytes)."""
    params = {"command": "spd.status"}
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand", "params": params,
                       "note": "é" * 10}, ensure_ascii=False).encode()


def bad_frames() -> list[tuple[str, bytes]]:
    body = status_request("hostile")
    n = len(body)
    return [
        ("lowercase header", b"content-length: %d\r\n\r\n" % n + body),
        ("no space after colon", b"Content-Length:%d\r\n\r\n" % n + body),
        ("LF-only line ends", b"Content-Length: %d\n\n" % n + body),
        ("length short by 10", b"Content-Length: %d\r\n\r\n" % (n - 10) + body),
        ("length long by 10", b"Content-Length: %d\r\n\r\n" % (n + 10) + body),
        ("negative length", b"Content-Length: -5\r\n\r\n" + body),
        ("non-numeric length", b"Content-Length: many\r\n\r\n" + body),
        ("no length header", b"Content-Type: application/json\r\n\r\n" + body),
        ("no header", body),
        ("garbage line", b"\x00\xffgarbage\r\nContent-Length: %d\r\n\r\n" % n + body),
        ("body not JSON", b"Content-Length: 5\r\n\r\n{{{{{"),
        ("length 1e14", b"Content-Length: 100000000000000\r\n\r\n"),
        ("length 2^63", b"Content-Length: 9223372036854775808\r\n\r\n"),
        ("length 3 GB", b"Content-Length: 3000000000\r\n\r\n" + body),
        ("duplicate length headers", b"Content-Length: 3\r\nContent-Length: %d\r\n\r\n" % n + body),
        ("header only, then EOF-free pause", b"Content-Length: 10\r\n"),
        ("invalid UTF-8 body", b"Content-Length: %d\r\n\r\n" % n + body.replace("é".encode(), b"\xff\xfe")),
    ]


async def framing_round(tmp: Path, name: str, data: bytes, rows: list[dict[str, Any]]) -> None:
    server = await Server.start(tmp)
    await server.initialize({"model": "/nowhere/none.gguf"})
    server.write(data)
    await asyncio.sleep(1.0)  # let a short body's stall pass
    _, probe = server.request("workspace/executeCommand", {"command": "spd.status"})
    answered = await server.answered(probe)
    rows.append({"case": name, "probe answered": answered, "alive": server.alive})
    await server.stop()


def positions() -> list[Any]:
    big = [-1, -(2**31), 2**31, 2**32, 2**53, 10**30, 1.5, -0.5, "3", None, True, [], {}]
    return [{"line": line, "character": 0} for line in big] + [{"line": 5, "character": c} for c in big]


def hostile_messages(rng: random.Random) -> list[tuple[str, str, Any]]:
    """(kind, method, params): requests whose every one must be answered."""
    td = {"uri": DOC}
    context = {"triggerKind": 1}
    out: list[tuple[str, str, Any]] = []
    for position in positions():
        out.append(("huge/negative/odd position", "textDocument/inlineCompletion",
                    {"textDocument": td, "position": position, "context": context}))
        out.append(("huge/negative/odd position", "textDocument/completion", {"textDocument": td, "position": position}))
    wrong = [None, 1, "x", [], [1, 2], {"textDocument": 5}, {"textDocument": td, "position": "here"},
             {"textDocument": td, "position": {"line": 0}}, {"textDocument": {"uri": 7}, "position": {"line": 0, "character": 0}},
             {"textDocument": td, "position": {"line": 0, "character": 0}, "context": {"triggerKind": 99}}]
    for params in wrong:
        for method in ("textDocument/inlineCompletion", "textDocument/completion", "workspace/executeCommand",
                       "workspace/symbol", "textDocument/hover"):
            out.append(("wrong types", method, params))
    for uri in ["", "file:///never/opened.py", "untitled:Untitled-1", "file:///../../etc/passwd", "http://x/y.py",
                "file:///%ZZ", "not a uri", "file:///bench/" + "a" * 5000 + ".py"]:
        out.append(("unknown URI", "textDocument/inlineCompletion",
                    {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}, "context": context}))
    for command, args in [("spd.nothing", []), ("spd.accept", [1, 2, 3, {"x": 1}]), ("spd.status", [None] * 5),
                          ("spd.accept", None), ("", []), ("spd.indexWorkspace", ["x"])]:
        out.append(("commands", "workspace/executeCommand", {"command": command, "arguments": args}))
    out.append(("unknown method", "spd/nothing", {}))
    rng.shuffle(out)
    return out


SURROGATE_DOC = "names = ['😀🎉', 'b', '𝔘𝔫𝔦']\nfor name in na😀😀 + 𝔘"


def bad_settings(rng: random.Random) -> list[dict[str, Any]]:
    values: list[Any] = [-1, 0, 1.5, 10**9, "abc", None, [], {}, True, float("1e308")]
    keys = ["k", "maxTokens", "decoding", "temperature", "multiline", "maxPrefixTokens", "device", "dtype"]
    settings = [{key: rng.choice(values)} for key in keys for _ in range(3)]
    settings += [{"ngrams": rng.choice([5, "x", {"alpha": "a"}, {"db": 5}, {"orders": [1, 99]}, {"weights": [1]}])}
                 for _ in range(10)]
    settings += [5, "x", [1], None]  # not even an object
    return settings


async def hostile_round(
    server: Server, rng: random.Random, options: dict[str, Any], tally: Counter[str], unanswered: Counter[str]
) -> None:
    async def ask(kind: str, method: str, params: Any, **envelope: Any) -> None:
        _, future = server.request(method, params, **envelope)
        tally[kind] += 1
        if not await server.answered(future):
            unanswered[kind] += 1

    server.notify("textDocument/didOpen", {"textDocument": {"uri": DOC, "languageId": "python", "version": 1,
                                                             "text": PROGRAM}})
    for kind, method, params in hostile_messages(rng):
        await ask(kind, method, params)
    # UTF-16: every column of a line with surrogate pairs, in both position encodings' worth of offsets
    uri = "file:///bench/surrogates.py"
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": SURROGATE_DOC}})
    for character in range(0, 32, 2):
        await ask("UTF-16 surrogate split", "textDocument/inlineCompletion",
                  {"textDocument": {"uri": uri}, "position": {"line": 1, "character": character},
                   "context": {"triggerKind": 1}})
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 1, "character": 15}, "end": {"line": 1, "character": 16}}, "text": "x"}]})
    # 5 MB document
    big = "".join(f"value_{i} = {i}\n" for i in range(350_000)) + "value_"
    server.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///bench/big.py", "languageId": "python",
                                                             "version": 1, "text": big}})
    await ask("5 MB document", "textDocument/inlineCompletion",
              {"textDocument": {"uri": "file:///bench/big.py"}, "position": {"line": 350_000, "character": 6},
               "context": {"triggerKind": 1}})
    server.notify("textDocument/didClose", {"textDocument": {"uri": "file:///bench/big.py"}})
    # bad settings: as a notification, then with an id (which must be answered too)
    for settings in bad_settings(rng):
        server.notify("workspace/didChangeConfiguration", {"settings": {"spd": settings}})
        await ask("bad settings (as a request)", "workspace/didChangeConfiguration", {"settings": {"spd": settings}})
    await ask("bad settings (as a request)", "workspace/didChangeConfiguration", {"settings": {"spd": options}})
    # bad envelopes
    for version in ("1.0", None, 2, ""):
        await ask("bad envelope", "workspace/executeCommand", {"command": "spd.status"}, jsonrpc=version)
    # garbage bytes, then a probe: the stream must resynchronise
    for _ in range(5):
        server.write(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) + b"\r\n\r\n")
        await ask("garbage bytes, then a request", "workspace/executeCommand", {"command": "spd.status"})


async def storm(server: Server, seconds: float, rate: float) -> dict[str, Any]:
    uri = "file:///bench/storm.py"
    text = PROGRAM
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": text}})
    rss_before = server.rss_mb()
    futures: list[tuple[bool, asyncio.Future[dict[str, Any]]]] = []
    started = time.monotonic()
    version = 1
    letters = "me_of_the_file_and_more_" * 1000
    while time.monotonic() - started < seconds:
        version += 1
        line, character = PROGRAM.count("\n"), len(text.split("\n")[-1])
        typed = letters[version % len(letters)]
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
            {"range": {"start": {"line": line, "character": character}, "end": {"line": line, "character": character}},
             "text": typed}]})
        text += typed
        msg_id, future = server.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character + 1},
            "context": {"triggerKind": 2}})
        cancel = version % 2 == 0
        if cancel:
            server.notify("$/cancelRequest", {"id": msg_id})
        futures.append((cancel, future))
        await asyncio.sleep(max(0.0, started + (version - 1) / rate - time.monotonic()))
    outcome: Counter[str] = Counter()
    for cancel, future in futures:
        if not await server.answered(future):
            outcome["unanswered"] += 1
        elif "error" in future.result():
            outcome["cancelled" if future.result()["error"]["code"] == -32800 else "error"] += 1
        else:
            outcome["answered"] += 1
    return {"sent": len(futures), **outcome, "rss_before_mb": round(rss_before, 1),
            "rss_after_mb": round(server.rss_mb(), 1), "alive": server.alive}


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="spd-faults-") as tmp_dir:
        tmp = Path(tmp_dir)
        frame_rows: list[dict[str, Any]] = []
        for name, data in bad_frames():
            await framing_round(tmp, name, data, frame_rows)
        print("\n## fresh servers, one bad frame each, then a probe request")
        for row in frame_rows:
            print(f"{row['case']:<34} probe answered: {row['probe answered']!s:<5} alive: {row['alive']}")
        options = {"k": 2, "maxTokens": 4} | ({"model": args.model} if args.model else {})
        server = await Server.start(tmp)
        await server.initialize(options)
        tally: Counter[str] = Counter()
        unanswered: Counter[str] = Counter()
        deaths = 0
        for _ in range(args.rounds):
            await hostile_round(server, rng, options, tally, unanswered)
            if not server.alive:
                deaths += 1
                server = await Server.start(tmp)
                await server.initialize(options)
        print(f"\n## one long-lived server, {args.rounds} rounds of hostile requests")
        print(f"{'kind':<34} {'sent':>6} {'unanswered':>10}")
        for kind, count in sorted(tally.items()):
            print(f"{kind:<34} {count:>6} {unanswered[kind]:>10}")
        print(f"{'total':<34} {sum(tally.values()):>6} {sum(unanswered.values()):>10}   deaths: {deaths}")
        print(f"error codes answered: {dict(sorted(server.errors.items()))}")
        result = await storm(server, args.storm_s, args.rate)
        print(f"\n## typing storm: {args.rate:g} requests/s for {args.storm_s:g} s, every other one cancelled")
        print(json.dumps(result))
        await server.stop()
        failed = deaths or sum(unanswered.values()) or result.get("unanswered") or not all(
            r["probe answered"] and r["alive"] for r in frame_rows)
        return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=12, help="rounds of hostile requests (~90 each)")
    parser.add_argument("--storm-s", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=20.0, help="typing-storm requests per second")
    parser.add_argument("--model", help="model for the long-lived server (default: the bundled one)")
    parser.add_argument("--seed", type=int, default=0)
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
