"""The engine as a Ray Serve deployment: routing, failover, equal answers, the ingress's auth.

One local Ray cluster (2 CPUs, small object store, no dashboard) and one deployment of two
CPU replicas of a tiny random model, saved to disk and loaded there by each replica, serve the
whole module.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from spd_lsp.decoding.types import DecodeOptions  # noqa: E402
from spd_lsp.ray_serve.client import ServeEngine  # noqa: E402
from spd_lsp.ray_serve.deployment import APP_NAME, DEPLOYMENT_NAME, ServeSettings, deploy  # noqa: E402
from spd_lsp.ray_serve.replica import ModelSettings  # noqa: E402
from tests.tiny_models import tiny_model  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[1]
OPTIONS = DecodeOptions(k=3, max_tokens=6)
PREFIX = "def add(a, b):\n    return "


def run(coroutine, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """The tiny model on disk, as a local Hugging Face directory: what the replicas load."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    loaded = tiny_model("llama")
    loaded.model.save_pretrained(directory)
    loaded.tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def model_settings(model_dir) -> ModelSettings:
    return ModelSettings(model=str(model_dir), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def cluster(model_settings):
    # The workers import this checkout's spd_lsp, not an installed copy.
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    ray.init(
        num_cpus=2, object_store_memory=80 * 1024 * 1024, include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}}, log_to_driver=False,
    )
    try:
        handle = deploy(ServeSettings(model=model_settings, replicas=2, num_cpus=0.5, health_check_period_s=1.0))
        yield ServeEngine(handle, timeout_s=60.0)
    finally:
        serve.shutdown()
        ray.shutdown()


def replica_states() -> dict:
    return dict(serve.status().applications[APP_NAME].deployments[DEPLOYMENT_NAME].replica_states)


def test_a_document_stays_on_its_replica_and_reuses_its_prompt_cache(cluster):
    async def scenario():
        same = [await cluster.complete(PREFIX, OPTIONS, key="alice:file:///a.py") for _ in range(3)]
        spread = [await cluster.complete(PREFIX, OPTIONS, key=f"user{n}:file:///b.py") for n in range(12)]
        return same, spread

    same, spread = run(scenario())
    assert len({answer.replica for answer in same}) == 1
    assert all(answer.result.timings.reused_tokens > 0 for answer in same[1:])  # the document's cache was there
    assert len({answer.replica for answer in spread}) == 2  # the keys use both replicas


def test_answers_equal_single_process_decoding(cluster, model_settings):
    from spd_lsp.engine import Engine
    from spd_lsp.model import load_model

    engine = Engine(load_model(model_settings.model, model_settings.device, model_settings.dtype))
    prefixes = [PREFIX, "for name in names:\n    if ", "import os\nimport "]
    for options in (OPTIONS, DecodeOptions(method="beam", k=2, max_tokens=5)):
        for prefix in prefixes:
            local = engine.complete(prefix, options)
            remote = run(cluster.complete(prefix, options, key=prefix)).result
            assert [(d.text, d.token_ids) for d in remote.drafts] == [(d.text, d.token_ids) for d in local.drafts]
            assert [d.score for d in remote.drafts] == pytest.approx([d.score for d in local.drafts], abs=1e-5)


def test_a_killed_replica_fails_over_and_is_replaced(cluster):
    key = "bob:file:///c.py"
    before = run(cluster.complete(PREFIX, OPTIONS, key=key))
    ray.kill(ray.get_actor(before.replica, namespace="serve"), no_restart=True)

    after = run(cluster.complete(PREFIX, OPTIONS, key=key))  # no error: retried on the other replica
    assert after.replica != before.replica
    assert [d.text for d in after.result.drafts] == [d.text for d in before.result.drafts]

    deadline = time.monotonic() + 120
    seen: set[str] = set()
    while len(seen) < 2:  # the replacement serves once the controller has started it and the router knows it
        assert time.monotonic() < deadline, f"the replica was not replaced: {replica_states()}, seen {seen}"
        seen = {run(cluster.complete(PREFIX, OPTIONS, key=f"carol{n}")).replica for n in range(12)}
    assert before.replica not in seen
    assert replica_states() == {"RUNNING": 2}
