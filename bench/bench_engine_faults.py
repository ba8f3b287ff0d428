"""The shared engine path under load and faults (issue 24, item 3), with the bundled model.

1. load: N front ends (real `spd-lsp --stdio`, `engine: "auto"`) typing against ONE engine
   for `--minutes`: requests sent / answered / with drafts, latency p50/p95/max, the
   engine's RSS sampled every 2 s (first, max, last);
2. kill -9: the engine killed mid-batch `--kills` times while the front ends type: per kill
   the slowest front end's time from the kill to its next answer with drafts, and whether
   any request went unanswered (hung) past ANSWER_S;
3. team server: a TCP engine with a token, `--clients` authenticated clients in a loop;
   their latency alone, with one client (its own process) flooding a dead port (the control:
   its CPU cost only), and flooding the engine with garbage (random bytes, bad frames, wrong
   tokens, reconnecting as fast as it can); then the same flood with the per-address limit off;
4. disk full (root only: a filled 256 kB tmpfs): the auto engine's runtime dir (socket and
   log) on it, and the dequantised model cache on it (a fresh cache directory).

    nice -n 5 .venv/bin/python -m bench.bench_engine_faults [--minutes 10] [--front-ends 8] [--kills 10]
        [--clients 16] [--team-s 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_faults import ANSWER_S, Server
from bench.bench_server import percentile, rss_mb
from bench.isolation import isolated_env
from spd_lsp.remote.daemon import answering

PROGRAM = "import os\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        path = os.path.join(root, "
URI = "file:///bench/engine_faults.py"
TOKEN = "bench-token-" + "z" * 24


def engine_pids(runtime: Path) -> set[int]:
    """Live `spd-lsp engine` processes whose socket is under `runtime` (from /proc: a front end's
    status keeps the pid of the engine it first connected to)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except (OSError, ValueError):
            continue
        if b"engine" in words and any(str(runtime).encode() in w for w in words) and state != "Z":
            found.add(int(entry.name))
    return found


def serving_pids(runtime: Path) -> set[int]:
    """The engines serving a socket under `runtime` (holding its serving lock): not their standby
    spares (`spd_lsp/remote/standby.py`), which `engine_pids` counts too."""
    from spd_lsp.remote.standby import serving_pid

    pids = {serving_pid(sock) for sock in runtime.glob("spd-lsp/engine-*.sock")}
    return {pid for pid in pids if pid is not None} & engine_pids(runtime)


def pss_mb(pid: int) -> float:
    """Proportional set size: pages shared with the standby (its fork's weights) counted half each."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class FrontEnd:
    """One typing front end: each request follows a new keystroke (a changed first line, so no
    shown draft answers for the engine)."""

    def __init__(self, server: Server, name: str) -> None:
        self.server, self.name, self.version = server, name, 1
        self.latencies: list[float] = []
        self.answers: list[tuple[float, bool]] = []  # (time answered, with drafts)
        self.sent = self.unanswered = 0

    async def open(self) -> None:
        self.server.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python",
                                                                      "version": 1, "text": self._text()}})

    def _text(self) -> str:
        return f"# {self.name} {self.version}\n{PROGRAM}"

    async def keystroke(self) -> None:
        self.version += 1
        self.server.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": self.version},
                                                       "contentChanges": [{"text": self._text()}]})
        lines = self._text().split("\n")
        _, future = self.server.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": URI}, "position": {"line": len(lines) - 1, "character": len(lines[-1])},
            "context": {"triggerKind": 2}})
        self.sent += 1
        started = time.monotonic()
        if not await self.server.answered(future):
            self.unanswered += 1
            return
        self.latencies.append(time.monotonic() - started)
        self.answers.append((time.monotonic(), bool((future.result().get("result") or {}).get("items"))))

    async def type_for(self, seconds: float, pause: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.keystroke()
            await asyncio.sleep(pause)


async def front_ends(count: int, tmp: Path, runtime: Path, model: str | None, *, standby: bool = True) -> list[FrontEnd]:
    options = {"engine": "auto", "engineStandby": standby, "k": 3, "maxTokens": 8} | ({"model": model} if model else {})
    ends = []
    for i in range(count):
        env = {**isolated_env(tmp / f"fe{i}"), "XDG_RUNTIME_DIR": str(runtime)}
        env.pop("SPD_LSP_ENGINE_LOADER", None)
        server = await Server.start(tmp, env=env)
        await server.initialize(options)
        end = FrontEnd(server, f"fe{i}")
        await end.open()
        ends.append(end)
    return ends


class RssSampler:
    """Every 2 s: the serving engine's RSS, and the PSS of every engine process (the serving one and its
    standby: they share the weights, which RSS would count twice)."""

    def __init__(self, runtime: Path) -> None:
        self.runtime, self.samples, self.pss = runtime, [], []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            serving, everyone = serving_pids(self.runtime), engine_pids(self.runtime)
            if serving:
                self.samples.append(sum(rss_mb(pid) for pid in serving))
                self.pss.append(sum(pss_mb(pid) for pid in everyone))
            await asyncio.sleep(2.0)

    def stop(self) -> dict[str, float]:
        self._task.cancel()
        s, p = self.samples or [float("nan")], self.pss or [float("nan")]
        return {"rss_first_mb": round(s[0]), "rss_max_mb": round(max(s)), "rss_last_mb": round(s[-1]),
                "pss_first_mb": round(p[0]), "pss_max_mb": round(max(p)), "pss_last_mb": round(p[-1])}


def _latency(values: list[float]) -> str:
    if not values:
        return "no answers"
    return (f"p50 {percentile(values, 0.50) * 1000:.0f} ms, p95 {percentile(values, 0.95) * 1000:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms")


async def load_phase(ends: list[FrontEnd], runtime: Path, seconds: float) -> None:
    sampler = RssSampler(runtime)
    await asyncio.gather(*(end.type_for(seconds, 0.5) for end in ends))
    rss = sampler.stop()
    latencies = [x for end in ends for x in end.latencies]
    sent, unanswered = sum(e.sent for e in ends), sum(e.unanswered for e in ends)
    drafts = sum(with_drafts for e in ends for _, with_drafts in e.answers)
    print(f"\n## load: {len(ends)} front ends typing for {seconds / 60:g} min against one auto engine")
    print(f"sent {sent}, answered {sent - unanswered}, with drafts {drafts}, unanswered {unanswered}; {_latency(latencies)}")
    print(f"serving engine RSS: first {rss['rss_first_mb']} MB, max {rss['rss_max_mb']} MB, last {rss['rss_last_mb']} MB; "
          f"engine + standby PSS: first {rss['pss_first_mb']} MB, max {rss['pss_max_mb']} MB, last {rss['pss_last_mb']} MB "
          f"({len(sampler.samples)} samples)")


async def kill_phase(ends: list[FrontEnd], runtime: Path, kills: int, gap: float) -> bool:
    """Kill the engine while every front end types; per kill, when each answered again (empty or
    not) and when each had drafts again; then type on `gap` s (1-2x, random) and kill again."""
    for end in ends:
        end.answers.clear()
        end.unanswered = 0
    stop = asyncio.Event()

    async def keep_typing(end: FrontEnd) -> None:
        while not stop.is_set():
            await end.keystroke()
            await asyncio.sleep(0.3)

    typing = [asyncio.create_task(keep_typing(end)) for end in ends]
    first_answer: list[float] = []
    drafts_again: list[float] = []
    takeover: list[float] = []  # kill -> another engine answers at the socket (the standby, or a new load)
    missing = 0
    for _ in range(kills):
        await asyncio.sleep(gap * random.uniform(1.0, 2.0))
        killed = time.monotonic()
        killed_pids = serving_pids(runtime)
        for pid in killed_pids:  # not its standby: that one is to take over
            os.kill(pid, signal.SIGKILL)
        while time.monotonic() - killed < ANSWER_S and not (serving_pids(runtime) - killed_pids and any(
                answering(sock) for sock in runtime.glob("spd-lsp/engine-*.sock"))):
            await asyncio.sleep(0.01)
        takeover.append(time.monotonic() - killed)
        while time.monotonic() - killed < ANSWER_S and not all(
                any(at > killed and with_drafts for at, with_drafts in end.answers) for end in ends):
            await asyncio.sleep(0.1)
        answered = [min((at for at, _ in end.answers if at > killed), default=float("inf")) - killed for end in ends]
        drafted = [min((at for at, d in end.answers if at > killed and d), default=float("inf")) - killed
                   for end in ends]
        missing += sum(x == float("inf") for x in drafted)
        first_answer.append(max(answered))
        drafts_again.append(max(drafted))
    stop.set()
    await asyncio.gather(*typing)
    unanswered = sum(end.unanswered for end in ends)
    print(f"\n## kill -9 of the engine mid-batch, {kills} times, {len(ends)} front ends typing (a keystroke every 0.3 s)")
    print("kill -> another engine answers at the socket: " + ", ".join(f"{x:.2f}s" for x in takeover))
    steady = [x for end in ends for x in end.latencies[-len(end.answers):]]
    print(f"every answer of the phase (the same keystrokes, kills included): {_latency(steady)}")
    print("slowest front end, kill -> its next answer (empty or not): " + ", ".join(f"{x:.1f}s" for x in first_answer))
    print("slowest front end, kill -> drafts again: " + ", ".join(f"{x:.1f}s" for x in drafts_again))
    print(f"max: next answer {max(first_answer):.1f} s, drafts again {max(drafts_again):.1f} s (target <= 5 s); "
          f"front ends without drafts after {ANSWER_S:.0f} s: {missing}; requests unanswered after {ANSWER_S:.0f} s: "
          f"{unanswered}; front ends alive: {sum(e.server.alive for e in ends)}/{len(ends)}")
    return unanswered == 0 and missing == 0 and max(first_answer) <= 5.0


def flood(host: str, port: int, seconds: float, token: str) -> int:
    """One client flooding `host:port` with garbage for `seconds` (random bytes, huge lengths, wrong
    tokens, bad frames after a good hello), reconnecting as fast as it can; run in its own process.
    Returns the connections it made (or tried: a dead port refuses each)."""
    from spd_lsp.remote import protocol

    rng, sent, deadline = random.Random(0), 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                kind = rng.randrange(4)
                if kind == 0:
                    sock.sendall(rng.randbytes(rng.randrange(1, 4096)))
                elif kind == 1:
                    sock.sendall(struct.pack(">I", 0xFFFFFFF0) + rng.randbytes(64))
                elif kind == 2:
                    protocol.send(sock, protocol.hello("wrong-token"))
                else:
                    protocol.send(sock, protocol.hello(TOKEN))
                    protocol.receive(sock)
                    sock.sendall(struct.pack(">I", 8) + b"\xc1" * 8)
        except (OSError, EOFError, protocol.FrameError):
            pass
        sent += 1
    return sent


def team_phase(clients: int, seconds: float, tmp: Path, model: str | None) -> None:
    """Per engine (the per-address limit on, then off): warm, then the clients alone, with the flooder
    (its own process) hitting a dead port (the control: only its CPU cost remains), and flooding the engine."""
    import concurrent.futures
    import multiprocessing

    from spd_lsp.api import DecodeOptions
    from spd_lsp.remote import protocol
    from spd_lsp.address import parse
    from spd_lsp.remote.client import Connection

    token = tmp / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    env = isolated_env(tmp)
    env.pop("SPD_LSP_ENGINE_LOADER", None)
    options = DecodeOptions(k=3, max_tokens=8).to_dict()
    dead = socket.socket()  # bound, never listening: every connection refused at once
    dead.bind(("127.0.0.1", 0))
    flooder = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    flooder.submit(time.sleep, 0).result()  # started before any phase

    def phase(address: Any, target: int | None) -> tuple[list[float], list[str], int]:
        latencies: list[float] = []
        failures: list[str] = []
        stop = threading.Event()
        connected = threading.Barrier(clients + 1)

        def client(n: int) -> None:
            connection = Connection(address, token=TOKEN)  # before the flood: an address backing off refuses new ones
            connected.wait()
            i = 0
            while not stop.is_set():
                i += 1
                started = time.monotonic()
                wire = {"prefix": f"# client {n} {i}\n{PROGRAM}", "options": options}
                _, future = connection.request(protocol.complete_request(0, wire))
                answer = future.result(timeout=ANSWER_S)
                if answer.get("op") != "result":
                    failures.append(str(answer.get("code")))
                latencies.append(time.monotonic() - started)
            connection.close()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        connected.wait()
        garbage = flooder.submit(flood, "127.0.0.1", target, seconds, TOKEN) if target else None
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join(ANSWER_S + 5)
        return latencies, failures, garbage.result() if garbage else 0

    print(f"\n## team server: {clients} authenticated TCP clients, {seconds:g} s per phase, the flooder in its own process")
    try:
        for limit in (None, "0"):
            command = [sys.executable, "-m", "spd_lsp.cli", "engine", "--tcp", "0", "--token-file", str(token),
                       "--log-level", "WARNING", *(["--peer-limit", limit] if limit else []),
                       *(["--model", model] if model else [])]
            engine = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
            try:
                where = next(line for line in engine.stdout if "listening on" in line).rsplit(" ", 1)[1].strip()
                address = parse(where)
                phase(address, None)  # warm: the first prompts of each client
                runs = [("alone", None)] + ([("flooding a dead port", dead.getsockname()[1])] if limit is None else [])
                runs.append(("flooding the engine", address.port))
                print(f"per-address limit: {'off (--peer-limit 0)' if limit else 'on (default)'}")
                for name, target in runs:
                    latencies, failed, garbage = phase(address, target)
                    print(f"  {name + ':':<22} {len(latencies)} answered, {len(failed)} failed; {_latency(latencies)}"
                          + (f"; {garbage} flood connections ({garbage / seconds:.0f}/s)" if target else ""))
                connection = Connection(address, token=TOKEN)
                _, future = connection.request({"op": protocol.STATUS})
                status = future.result(timeout=30)["status"]
                connection.close()
                print(f"  engine alive: {engine.poll() is None}; refused {status['refused']}, bad frames "
                      f"{status['badFrames']}, peers {status.get('peers')}")
            finally:
                engine.kill()
                engine.wait()
    finally:
        flooder.shutdown()
        dead.close()


async def disk_full_phase(tmp: Path, model: str | None) -> None:
    mount = tmp / "full"
    mount.mkdir(mode=0o700)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        print("\n## disk full: skipped (mounting a tmpfs needs root)")
        return
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={mount / 'fill'}", "bs=4k"], capture_output=True)
        print("\n## disk full (a filled 256 kB tmpfs)")
        runtime = mount
        ends = await front_ends(1, tmp / "full-runtime", runtime, model)
        await ends[0].type_for(40, 0.5)  # the engine loads meanwhile
        drafts = sum(with_drafts for _, with_drafts in ends[0].answers)
        print(f"auto engine with its socket and log on it: {ends[0].sent} sent, {len(ends[0].answers)} answered, "
              f"{drafts} with drafts; engines running: {len(engine_pids(runtime))}")
        for pid in engine_pids(runtime):
            os.kill(pid, signal.SIGTERM)
        await ends[0].server.stop()
        env = {**isolated_env(tmp / "cache-full"), "SPD_LSP_MODEL_CACHE": str(mount / "cache")}
        env.pop("SPD_LSP_ENGINE_LOADER", None)
        started, sock = time.monotonic(), tmp / "c.sock"
        engine = subprocess.Popen([sys.executable, "-m", "spd_lsp.cli", "engine", "--socket", str(sock),
                                   "--idle-timeout", "5", *(["--model", model] if model else [])],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        while not answering(sock) and engine.poll() is None and time.monotonic() - started < 300:
            await asyncio.sleep(0.2)
        loaded = time.monotonic() - started
        if engine.poll() is None:
            from spd_lsp.remote import protocol
            from spd_lsp.address import parse
            from spd_lsp.remote.client import Connection

            connection = Connection(parse(f"unix:{sock}"))
            _, future = connection.request(protocol.complete_request(0, {"prefix": PROGRAM, "options": {"k": 3}}))
            drafts = len(future.result(timeout=120).get("drafts") or [])
            _, future = connection.request({"op": protocol.STATUS})
            note = future.result(timeout=30)["status"]["model"].get("modelCache")
            connection.close()
            print(f"engine with its model cache on it: serving after {loaded:.0f} s, {drafts} drafts; status: {note}")
        engine.wait(60)
        said = engine.stderr.read().count("cannot write the model cache")
        print(f"  exit {engine.returncode} once idle; the reason in its log {said} time(s)")
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


async def run(args: argparse.Namespace) -> int:
    random.seed(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="spd-engine-faults-"))
    runtime = Path(f"/tmp/spd-ef-{os.getpid()}")
    runtime.mkdir(mode=0o700)
    ok = True
    try:
        if args.minutes > 0 or args.kills > 0:
            ends = await front_ends(args.front_ends, tmp, runtime, args.model, standby=args.standby)
            try:
                await asyncio.gather(*(end.keystroke() for end in ends))  # the engine starts, once
                if args.minutes > 0:
                    await load_phase(ends, runtime, args.minutes * 60)
                if args.kills > 0:
                    ok = await kill_phase(ends, runtime, args.kills, args.kill_gap) and ok
            finally:
                for end in ends:
                    await end.server.stop()
                for pid in engine_pids(runtime):
                    os.kill(pid, signal.SIGTERM)
        if args.clients > 0:
            team_phase(args.clients, args.team_s, tmp, args.model)
        if args.disk_full:
            await disk_full_phase(tmp, args.model)
    finally:
        if os.environ.get("SPD_BENCH_KEEP_LOGS"):  # the engines' logs, for a run to explain
            for log in runtime.glob("spd-lsp/*.log"):
                shutil.copy(log, Path(os.environ["SPD_BENCH_KEEP_LOGS"]) / log.name)
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="load phase length (0: skip)")
    parser.add_argument("--front-ends", type=int, default=8)
    parser.add_argument("--kills", type=int, default=10, help="kill -9 of the engine (0: skip)")
    parser.add_argument("--kill-gap", type=float, default=5.0,
                        help="after the drafts are back, type this long (1-2x, random) before the next kill")
    parser.add_argument("--clients", type=int, default=16, help="team-server clients (0: skip)")
    parser.add_argument("--team-s", type=float, default=60.0, help="seconds per team-server phase")
    parser.add_argument("--no-disk-full", dest="disk_full", action="store_false")
    parser.add_argument("--no-standby", dest="standby", action="store_false", help="engineStandby: false")
    parser.add_argument("--model", help="model (default: the bundled one)")
    parser.add_argument("--seed", type=int, default=0)
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
