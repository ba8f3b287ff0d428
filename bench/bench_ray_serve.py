"""Requests/s and p50/p95 through the Ray Serve ingress with 1 and 2 replicas, and the Ray hop's cost.

N simulated editors, each on its own authenticated TCP connection, type through their own
file (a standard-library module): every request's prompt is the file up to a cursor that moves
on by a few characters, so a document's prompt keeps its head (its affinity key) and the
replica that owns it reuses its prompt cache ("reused" = share of requests that did). The
baseline is the plain engine daemon (`spd-lsp engine --tcp`: the same TCP front and batching
scheduler over one engine, in its own process on one thread like a replica): the difference
is the Ray hop (the ingress in this process, Serve's router, the replica call).

    nice -n 10 .venv/bin/python -m bench.bench_ray_serve --model tiny
    nice -n 10 .venv/bin/python -m bench.bench_ray_serve            # the bundled model

On a 2-core machine two CPU replicas share the cores with the client, the ingress and Ray's
own processes: read the 2-replica rows as a check that routing spreads load, not as scaling.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

SOURCES = ("argparse", "json.encoder", "logging", "pathlib", "shutil", "textwrap", "tempfile", "string")
TOKEN = "bench-token-0123456789abcdefgh"


@dataclass
class Run:
    name: str
    latencies: list[float] = field(default_factory=list)
    reused: int = 0
    wall_s: float = 0.0

    def row(self) -> str:
        ms = sorted(1000 * t for t in self.latencies)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return (f"| {self.name} | {len(ms)} | {len(ms) / self.wall_s:.1f} | {statistics.median(ms):.0f} | {p95:.0f} "
                f"| {100 * self.reused / len(ms):.0f}% |")


def documents(editors: int, requests: int, *, start: int, step: int) -> list[list[str]]:
    """Each editor's prompts: its file up to a cursor moving on by `step` characters."""
    import importlib

    texts = [inspect.getsource(importlib.import_module(SOURCES[n % len(SOURCES)])) for n in range(editors)]
    return [[text[: start + step * i + 97 * n] for i in range(requests)] for n, text in enumerate(texts)]


def tiny_model_dir(where: Path) -> str:
    from tests.tiny_models import tiny_model

    loaded = tiny_model("llama")
    loaded.model.save_pretrained(where)
    loaded.tokenizer.save_pretrained(where)
    return str(where)


@contextlib.contextmanager
def plain_daemon(model) -> Iterator[tuple[str, int]]:
    """`spd-lsp engine --tcp` in its own process (one decoding thread, like a replica)."""
    from spd_lsp.remote.daemon import model_args

    command = [sys.executable, "-m", "spd_lsp.cli", "engine", "--tcp", "0", *model_args(model),
               "--log-level", "WARNING"]
    env = {**os.environ, "SPD_LSP_TOKEN": TOKEN, "OMP_NUM_THREADS": "1"}
    daemon = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = daemon.stdout.readline()  # "spd-lsp engine: listening on tcp://HOST:PORT"
        host, port = line.strip().rsplit("//", 1)[-1].rsplit(":", 1)
        yield host, int(port)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def hop(plain, ray_ingress, rounds: int) -> tuple[list[float], list[float]]:
    """Round trips of a request every engine refuses at once (a bad option), alternating between
    the plain daemon and the Ray ingress (which forwards it to a replica): the cost of the hop alone."""
    from spd_lsp.remote import protocol

    times: tuple[list[float], list[float]] = ([], [])
    refused = protocol.complete_request(0, {"prefix": "x", "options": {"k": "three"}})
    with socket.create_connection(plain, timeout=60) as a, socket.create_connection(ray_ingress, timeout=60) as b:
        for sock in (a, b):
            protocol.send(sock, protocol.hello(TOKEN))
            protocol.receive(sock)
        for _ in range(rounds):
            for sock, into in ((a, times[0]), (b, times[1])):
                started = time.perf_counter()
                protocol.send(sock, refused)
                assert protocol.receive(sock)["code"] == protocol.BAD_REQUEST
                into.append(time.perf_counter() - started)
    return times


def measured(address, prompts: list[list[str]], options: dict, editors: list[int], what: str) -> list[Run]:
    through_ingress(address, "warm-up", warm_up(prompts), options)
    return [through_ingress(address, f"{what}, {plural(n, 'editor')}", prompts[:n], options) for n in editors]


def warm_up(prompts: list[list[str]]) -> list[list[str]]:
    """One request per editor on other heads than the measured ones: nothing cached is shared."""
    return [[f"# warm-up {n}\n" + p[0]] for n, p in enumerate(prompts)]


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n > 1)}"


def editor(address, prompts: list[str], options: dict, run: Run, lock: threading.Lock) -> None:
    """One editor's connection, its requests one after another (as the front end sends them)."""
    from spd_lsp.remote import protocol

    affinity = f"editor-{id(prompts)}"  # as the front end sends: its own key
    with socket.create_connection(address, timeout=300) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        assert protocol.receive(sock).get("ok"), "the ingress refused the token"
        for n, prompt in enumerate(prompts):
            started = time.perf_counter()
            protocol.send(sock, protocol.complete_request(n, {"prefix": prompt, "options": options}, affinity=affinity))
            answer = protocol.receive(sock)
            elapsed = time.perf_counter() - started
            assert answer["op"] == protocol.RESULT, answer
            with lock:
                run.latencies.append(elapsed)
                run.reused += answer["timings"]["reused_tokens"] > 0


def through_ingress(address, name: str, prompts: list[list[str]], options: dict) -> Run:
    run, lock = Run(name), threading.Lock()
    threads = [threading.Thread(target=editor, args=(address, mine, options, run, lock)) for mine in prompts]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.wall_s = time.perf_counter() - began
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="'tiny' (a random 2-layer Llama), else as spd-lsp's --model (default bundled)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--editors", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--requests", type=int, default=12, help="per editor")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--hop-rounds", type=int, default=200, help="refused requests timed per engine for the hop")
    args = parser.parse_args()

    import ray
    from ray import serve

    from spd_lsp.api import DecodeOptions
    from spd_lsp.remote.server import Listener
    from spd_lsp.remote.ray.client import ServeEngine
    from spd_lsp.remote.ray.deployment import APP_NAME, ServeSettings, deploy
    from spd_lsp.remote.ray.ingress import RayIngress, in_background
    from spd_lsp.api import ModelSpec
    from spd_lsp.remote.ray.replica import ReplicaSettings

    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    tiny = args.model == "tiny"
    model = ModelSpec(path=tiny_model_dir(work) if tiny else args.model, device="cpu",
                      dtype="float32" if tiny else args.dtype)
    options = DecodeOptions(k=args.k, max_tokens=args.max_tokens).to_dict()
    prompts = documents(max(args.editors), args.requests, start=600, step=23)
    repo = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
    hops: tuple[list[float], list[float]] = ([], [])
    with plain_daemon(model) as plain:
        runs = measured(plain, prompts, options, args.editors, "plain engine daemon")
        ray.init(num_cpus=2, object_store_memory=80 * 1024 * 1024, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}})
        try:
            for replicas in args.replicas:
                engine = ServeEngine(deploy(ServeSettings(replica=ReplicaSettings(model), replicas=replicas, num_cpus=1)))
                described = asyncio.run(engine.describe())
                running = in_background(RayIngress(engine, described, Listener(port=0, token=TOKEN)))
                runs += measured(running.address, prompts, options, args.editors, f"Ray ingress, {plural(replicas, 'replica')}")
                if replicas == 1:
                    hops = hop(plain, running.address, args.hop_rounds)
                running.stop()
                serve.delete(APP_NAME)
        finally:
            serve.shutdown()
            ray.shutdown()
        runs += measured(plain, prompts, options, args.editors, "plain engine daemon, again")  # the load's drift

    print(f"\nmodel {model.path or 'bundled'} ({model.dtype}), k={args.k}, {args.max_tokens} tokens, "
          f"{args.requests} requests per editor, load average {os.getloadavg()[0]:.1f}")
    print("| set-up | requests | req/s | p50 ms | p95 ms | prompt cache reused |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        print(run.row())
    if hops[0]:
        plain_ms, ray_ms = (statistics.median(t) * 1000 for t in hops)
        print(f"\nThe Ray hop alone ({len(hops[0])} refused requests, interleaved): p50 {ray_ms:.2f} ms through "
              f"the Ray ingress vs {plain_ms:.2f} ms from the plain daemon: {ray_ms - plain_ms:+.2f} ms per request")


if __name__ == "__main__":
    main()
