"""The engine as a Ray Serve deployment: routing, failover, equal answers, the ingress's auth.

One local Ray cluster (2 CPUs, small object store, no dashboard) and one deployment of two
CPU replicas of a tiny random model, saved to disk and loaded there by each replica, serve the
whole module.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from spd_lsp.api import DecodeOptions, DecodeRequest, ModelSpec  # noqa: E402
from spd_lsp.remote import protocol  # noqa: E402
from spd_lsp.remote.server import Listener  # noqa: E402
from spd_lsp.remote.ray.client import ServeEngine, affinity_key  # noqa: E402
from spd_lsp.remote.ray.deployment import (  # noqa: E402
    APP_NAME, DEPLOYMENT_NAME, ROUTER, ServeSettings, deploy, deployment_options,
)
from spd_lsp.remote.ray.ingress import RayIngress, in_background  # noqa: E402
from spd_lsp.remote.ray.replica import ReplicaSettings  # noqa: E402
from tests.tiny_models import tiny_model  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
OPTIONS = DecodeOptions(k=3, max_tokens=6)
PREFIX = "def add(a, b):\n    return "
TOKEN = "team-token-0123456789abcdef"


def run(coroutine, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def ask(engine: ServeEngine, prefix: str, options: DecodeOptions, *, key: str):
    return run(engine.complete(protocol.complete_request(0, DecodeRequest(prefix, options), affinity=key)))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """The tiny model on disk, as a local Hugging Face directory: what the replicas load."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    loaded = tiny_model("llama")
    loaded.model.save_pretrained(directory)
    loaded.tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def model_settings(model_dir) -> ReplicaSettings:
    return ReplicaSettings(model=ModelSpec(path=str(model_dir), device="cpu", dtype="float32"))


@pytest.fixture(scope="module")
def cluster(model_settings):
    # The workers import this checkout's spd_lsp, not an installed copy.
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    ray.init(
        num_cpus=2, object_store_memory=80 * 1024 * 1024, include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}}, log_to_driver=False,
    )
    try:
        handle = deploy(ServeSettings(replica=model_settings, replicas=2, num_cpus=0.5, health_check_period_s=1.0))
        yield ServeEngine(handle, timeout_s=60.0)
    finally:
        serve.shutdown()
        ray.shutdown()


def replica_states() -> dict:
    return dict(serve.status().applications[APP_NAME].deployments[DEPLOYMENT_NAME].replica_states)


def test_a_document_stays_on_its_replica_and_reuses_its_prompt_cache(cluster):
    same = [ask(cluster, PREFIX, OPTIONS, key="alice:file:///a.py") for _ in range(3)]
    spread = [ask(cluster, PREFIX, OPTIONS, key=f"user{n}:file:///b.py") for n in range(12)]
    assert len({answer.replica for answer in same}) == 1
    assert all(answer.result.timings.reused_tokens > 0 for answer in same[1:])  # the document's cache was there
    assert len({answer.replica for answer in spread}) == 2  # the keys use both replicas


def test_answers_equal_single_process_decoding(cluster, model_settings):
    from spd_lsp.engine.loading import load_local

    engine = load_local(model_settings.model).engine  # what each replica loads
    prefixes = [PREFIX, "for name in names:\n    if ", "import os\nimport "]
    for options in (OPTIONS, DecodeOptions(method="beam", k=2, max_tokens=5)):
        for prefix in prefixes:
            local = engine.complete(DecodeRequest(prefix, options))
            remote = ask(cluster, prefix, options, key=prefix).result
            assert [(d.text, d.token_ids) for d in remote.drafts] == [(d.text, d.token_ids) for d in local.drafts]
            assert [d.score for d in remote.drafts] == pytest.approx([d.score for d in local.drafts], abs=1e-5)


def test_a_killed_replica_fails_over_and_is_replaced(cluster):
    key = "bob:file:///c.py"
    before = ask(cluster, PREFIX, OPTIONS, key=key)
    slow = DecodeOptions.of(k=3, max_tokens=256, stop_at_newline=False, heal=False)  # the limits: no early end
    long = protocol.complete_request(0, DecodeRequest(PREFIX, slow), affinity=key)
    started = time.monotonic()
    alone = run(cluster.complete(long), timeout=120)
    took = time.monotonic() - started
    assert alone.result is not None and alone.replica == before.replica, alone.refusal

    async def killed_mid_request():
        running = [asyncio.create_task(cluster.complete(long)) for _ in range(4)]
        await asyncio.sleep(took / 4)  # on their replica now, decoding (4 together take at least as long as one)
        assert not [task.result() for task in running if task.done()], f"answered before the kill ({took:.2f} s alone)"
        ray.kill(ray.get_actor(before.replica, namespace="serve"), no_restart=True)
        return await asyncio.gather(*running)

    lost = run(killed_mid_request(), timeout=120 + 10 * took)  # none lost: each is sent again, to the other replica
    assert all(answer.result.drafts and answer.replica != before.replica for answer in lost)
    after = ask(cluster, PREFIX, OPTIONS, key=key)
    assert after.replica != before.replica
    assert [d.text for d in after.result.drafts] == [d.text for d in before.result.drafts]

    deadline = time.monotonic() + 120
    seen: set[str] = set()
    while len(seen) < 2:  # the replacement serves once the controller has started it and the router knows it
        assert time.monotonic() < deadline, f"the replica was not replaced: {replica_states()}, seen {seen}"
        seen = {ask(cluster, PREFIX, OPTIONS, key=f"carol{n}").replica for n in range(12)}
    assert before.replica not in seen
    assert replica_states() == {"RUNNING": 2}


@pytest.fixture(scope="module")
def ingress(cluster):
    """The TCP front on a loopback port, its loop on a thread of this process."""
    running = in_background(RayIngress(cluster, run(cluster.describe()), Listener(port=0, token=TOKEN)))
    yield running.address
    running.stop()


def connect(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=60)
    return sock


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


@pytest.mark.parametrize("first", [
    protocol.hello(None),
    protocol.hello("wrong-token-0123456789abcdef"),
    protocol.complete_request(1, DecodeRequest(PREFIX)),
])
def test_the_ingress_turns_away_a_client_without_the_token(ingress, first):
    with connect(ingress) as sock:
        protocol.send(sock, first)
        answer = protocol.receive(sock)
        assert answer["op"] == protocol.ERROR and answer["code"] == protocol.UNAUTHORIZED
        assert closed(sock)


@pytest.mark.parametrize("garbage", [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x03abc", b"GET / HTTP/1.1\r\n\r\n"])
def test_garbage_on_the_ingress_port_is_refused_and_serving_goes_on(ingress, cluster, garbage):
    with connect(ingress) as sock:
        sock.sendall(garbage)
        answer = protocol.receive(sock)
        assert answer["op"] == protocol.ERROR and answer["code"] in (protocol.BAD_FRAME, protocol.UNAUTHORIZED)
        assert closed(sock)
    test_the_ingress_answers_like_the_deployment(ingress, cluster)


def test_the_ingress_answers_like_the_deployment(ingress, cluster):
    with connect(ingress) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        assert protocol.receive(sock)["ok"] is True
        protocol.send(sock, protocol.complete_request(7, DecodeRequest(PREFIX, OPTIONS)))
        protocol.send(sock, protocol.complete_request(8, {"prefix": PREFIX, "options": {"k": "three"}}))
        answers = {message["id"]: message for message in (protocol.receive(sock), protocol.receive(sock))}
    direct = ask(cluster, PREFIX, OPTIONS, key="direct").result
    assert [d["text"] for d in answers[7]["drafts"]] == [d.text for d in direct.drafts]
    assert answers[8]["code"] == protocol.BAD_REQUEST  # a bad request is answered; the connection lives on


def test_a_front_end_uses_the_ingress_as_its_engine(ingress, cluster, monkeypatch):
    from spd_lsp.settings import Settings
    from spd_lsp.remote.connect import load_remote

    monkeypatch.setenv("SPD_LSP_TOKEN", TOKEN)
    host, port = ingress
    loaded = load_remote(Settings(engine=f"tcp://{host}:{port}"))
    try:
        plain = replace(OPTIONS, alpha=0.0)  # no n-grams: the same request as `ask`'s
        drafts = loaded.engine.complete(DecodeRequest(PREFIX, plain)).drafts
        assert [d.text for d in drafts] == [d.text for d in ask(cluster, PREFIX, plain, key="x").result.drafts]
        with_document = loaded.engine.complete(DecodeRequest(PREFIX, OPTIONS))  # the document's n-grams go inline to the replica
        assert with_document.drafts and loaded.engine.failures == 0
    finally:
        loaded.engine.close()


def test_autoscaling_follows_queue_length_between_the_given_bounds():
    options = deployment_options(ServeSettings(replicas=2, max_replicas=6, target_ongoing_requests=3.0, num_gpus=1))
    assert "num_replicas" not in options
    assert options["autoscaling_config"] == {
        "min_replicas": 2, "initial_replicas": 2, "max_replicas": 6, "target_ongoing_requests": 3.0,
    }
    assert options["ray_actor_options"]["num_gpus"] == 1  # one model per GPU
    assert options["request_router_config"].request_router_class == ROUTER
    assert deployment_options(ServeSettings(replicas=3))["num_replicas"] == 3
    with pytest.raises(ValueError, match="max_replicas"):
        ServeSettings(replicas=3, max_replicas=2)


def test_the_affinity_key_is_the_front_ends_else_the_prompts_head():
    frame = protocol.complete_request(0, DecodeRequest("x" * 300 + "tail"), affinity="editor-1/file:///a.py")
    assert affinity_key(frame) == "editor-1/file:///a.py"
    head = protocol.complete_request(0, DecodeRequest("x" * 300 + "tail"))
    typed_on = protocol.complete_request(0, DecodeRequest("x" * 300 + "tail and more"))
    other = protocol.complete_request(0, DecodeRequest("y" + "x" * 300))
    assert affinity_key(head) == affinity_key(typed_on) != affinity_key(other)


@pytest.mark.parametrize(("argv", "says"), [
    (["--ray", "--replicas", "2"], "--tcp"),
    (["--ray", "--tcp", "0", "--replicas", "0"], "replicas must be at least 1"),
])
def test_the_ray_engine_command_refuses_bad_flags_clearly(argv, says):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "spd_lsp.cli", "engine", *argv], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and says in done.stderr


def test_a_cancel_on_the_ingress_answers_cancelled(ingress):
    with connect(ingress) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        protocol.receive(sock)
        # One write: the cancel is read before the request is forwarded.
        sock.sendall(protocol.encode(protocol.complete_request(3, DecodeRequest(PREFIX, OPTIONS)))
                     + protocol.encode({"op": protocol.CANCEL, "id": 3}))
        answer = protocol.receive(sock)
        assert (answer["op"], answer["id"], answer["code"]) == (protocol.ERROR, 3, protocol.CANCELLED)
        protocol.send(sock, protocol.complete_request(4, DecodeRequest(PREFIX, OPTIONS)))  # the connection goes on
        assert protocol.receive(sock)["op"] == protocol.RESULT
