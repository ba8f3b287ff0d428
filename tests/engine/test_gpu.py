"""The engine and the server on CUDA: skipped where there is no GPU (scripts/gpu-check.sh runs it on one).

Needs only torch, transformers and pygls (no pytest plugins), so that it runs on a
bare GPU machine. The real-model tests use $SPD_LSP_GPU_MODEL when set (a local
model directory: the bundled GGUF may not travel there), else the bundled model.
SPD_LSP_TEST_DEVICE=cpu runs the same checks on the CPU (the script's dry run).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import torch
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from spd_lsp.api import DecodeOptions, DecodeRequest, METHODS
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import LoadedModel, ModelLoadError, load_model, pick_device, resolve_source
from bench.baselines import register as register_baselines
from tests.tiny_models import ARCHITECTURES, tiny_model

register_baselines()  # nucleus_batched, the benchmarks' baseline: the engine decodes it where they run it

DEVICE = torch.device(os.environ.get("SPD_LSP_TEST_DEVICE", "cuda"))
needs_device = pytest.mark.skipif(DEVICE.type == "cuda" and not torch.cuda.is_available(), reason="no CUDA device")
PREFIX = "for name in names:\n    if name"  # ends mid-word: token healing runs, the path that broke on CUDA
CODE = "import os\n\n\ndef list_python_files(root):\n    result = []\n    for name in os.listdir(root):\n        if name"
MODEL = os.environ.get("SPD_LSP_GPU_MODEL") or None
TIMEOUT_S = 300


def on_device(loaded: LoadedModel) -> LoadedModel:
    return LoadedModel(**{**vars(loaded), "model": loaded.model.to(DEVICE), "device": DEVICE})


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")
def test_a_device_that_is_not_here_is_one_clear_error() -> None:
    with pytest.raises(ModelLoadError, match="sees no CUDA GPU"):
        pick_device("cuda")
    with pytest.raises(ModelLoadError, match="unknown device 'gpu'"):
        pick_device("gpu")
    assert pick_device("cpu") == torch.device("cpu")


@needs_device
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_tiny_engine_on_the_device_gives_the_cpus_greedy_draft(architecture: str) -> None:
    options = DecodeOptions(method="greedy", k=1, stop_at_newline=False)
    on_cpu = LocalEngine(tiny_model(architecture)).complete(DecodeRequest(PREFIX, options)).drafts
    engine = LocalEngine(on_device(tiny_model(architecture)))
    assert engine.complete(DecodeRequest(PREFIX, options)).drafts[0].token_ids == on_cpu[0].token_ids
    for method in METHODS:
        drafts = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method=method, k=3, seed=0))).drafts
        assert drafts and all(d.text.strip() for d in drafts), method


@needs_device
def test_the_engine_batch_on_the_device_answers_as_each_request_alone() -> None:
    """Continuous batching on the device: slot buffers, joint prefills of typing editors, batched
    verification; superposed and batched-nucleus requests together answer what each does alone (on a
    GPU, batched matmuls may sum in another order than single ones: up to two near-tie flips allowed)."""
    from spd_lsp.engine.batcher import BatchJob, Batcher

    torch.manual_seed(0)
    engine = LocalEngine(on_device(tiny_model("llama")))
    prefixes = [PREFIX, CODE, PREFIX + " ==", CODE + " and"]
    options = [DecodeOptions(k=3, max_tokens=8, stop_at_newline=False, alpha=0.0),
               DecodeOptions.of(method="nucleus_batched", k=3, max_tokens=6, stop_at_newline=False, seed=5)]
    alone = [[d.text for d in engine.complete(DecodeRequest(p, o)).drafts] for p in prefixes for o in options]
    scheduler = Batcher(engine)
    try:
        for p in prefixes:  # each editor's prompt cached first, so the typed requests join together
            scheduler.submit(BatchJob(DecodeRequest(p[:-3], options[0]), affinity=p)).result(timeout=TIMEOUT_S)
        primed = scheduler.counts["prefillForwards"]
        futures = [scheduler.submit(BatchJob(DecodeRequest(p, o), affinity=p if o is options[0] else p + "nucleus"))
                   for p in prefixes for o in options]
        together = [[d.text for d in f.result(timeout=TIMEOUT_S).drafts] for f in futures]
    finally:
        scheduler.close()
    same = sum(a == b for a, b in zip(together, alone))
    assert len(together) == len(alone) and sum(map(bool, together)) >= 4 and same >= len(alone) - 2, (together, alone)
    assert scheduler.counts["maxBatched"] >= 2 and scheduler.counts["alone"] == 0
    # the four typed superposed requests share a forward; the nucleus ones start cold, one by one
    assert scheduler.counts["prefillForwards"] - primed < len(futures)


@needs_device
def test_both_candidate_placements_give_the_same_drafts() -> None:
    engine = LocalEngine(on_device(tiny_model("llama")))
    options = DecodeOptions(method="superposed", k=3, stop_at_newline=False)
    moved = engine.complete(DecodeRequest(PREFIX, options)).drafts  # candidates come to the CPU each step
    engine.candidate_device = None  # candidates stay on the model's device
    kept = engine.complete(DecodeRequest(PREFIX, options)).drafts
    assert [d.token_ids for d in kept] == [d.token_ids for d in moved]


@pytest.fixture(scope="module")
def model_spec() -> str | None:
    try:
        resolve_source(MODEL)
    except ModelLoadError as exc:
        pytest.skip(f"no real model here: {exc}")
    return MODEL


@needs_device
def test_real_model_on_the_device_drafts_code(model_spec: str | None) -> None:
    loaded = load_model(model_spec, device=str(DEVICE))
    assert next(loaded.model.parameters()).device.type == DEVICE.type
    engine = LocalEngine(loaded)
    for method in METHODS:
        result = engine.complete(DecodeRequest(CODE, DecodeOptions.of(method=method, k=3, seed=0)))
        assert result.drafts and all(d.text.strip() for d in result.drafts), method
        assert result.timings.steps > 0


async def serve_one_completion(model_spec: str | None, cache: Path) -> tuple[list[lsp.InlineCompletionItem], dict]:
    env = {**os.environ, "SPD_LSP_CACHE": str(cache)}
    client = LanguageClient("spd-gpu-test", "1")
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=env)
    try:
        options = {"engine": "in-process", "device": DEVICE.type, "k": 3, "maxTokens": 10}
        if model_spec:
            options["model"] = model_spec
        await client.initialize_async(
            lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), initialization_options=options)
        )
        client.initialized(lsp.InitializedParams())
        uri = "file:///gpu/walk.py"
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=CODE))
        )
        lines = CODE.split("\n")
        params = lsp.InlineCompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(len(lines) - 1, len(lines[-1])),
            context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Invoked),
        )
        result = await asyncio.wait_for(client.text_document_inline_completion_async(params), TIMEOUT_S)
        status_request = client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="spd.status"))
        status = await asyncio.wait_for(status_request, TIMEOUT_S)
        await client.shutdown_async(None)
        client.exit(None)
        return list(result.items) if result else [], status
    finally:
        await client.stop()


@needs_device
def test_server_on_the_device_answers_with_drafts(model_spec: str | None, tmp_path: Path) -> None:
    items, status = asyncio.run(serve_one_completion(model_spec, tmp_path))
    assert status["model"] and status["model"]["device"].startswith(DEVICE.type), status
    assert items and all(item.insert_text.strip() for item in items)
    assert status["answered"] == 1
