"""The fast path's model without transformers' model classes (`engine/fast/light.py`): the same weights, rotary
tables and drafts as transformers' model, and a start that imports none of its model code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast import light
from tests.engine.test_fast import MODELS
from tests.tiny_models import tiny_tokenizer

REPO = Path(__file__).resolve().parents[2]


def _saved(model: torch.nn.Module, directory: Path) -> Path:
    model.save_pretrained(directory)
    tiny_tokenizer().save_pretrained(directory)
    return directory


def _runs(model: torch.nn.Module, ids: list[int]) -> list[torch.Tensor]:
    """Logits of `ids`' prompt and of three decode steps after it, through the fast path (eager) on `model`."""
    fast.attach(model, fast.build(model, compile=False))
    runner = ModelRunner(model, torch.device("cpu"))
    logits, _ = runner.prefill(ids)
    out = [logits]
    for token in (5, 7, 11):
        out.append(runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[token]]))))
    return out


@pytest.mark.parametrize("family", ["llama", "qwen2", "llama-biases"])  # the families it holds (Qwen3, Gemma-3:
# transformers' model, `test_a_model_it_does_not_cover_loads_through_transformers`)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_it_holds_transformers_weights_and_answers_as_the_fast_path_on_transformers_model(family, dtype, tmp_path):
    directory = _saved(MODELS[family](), tmp_path)
    reference = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype).eval()
    made = light.load(directory, dtype)
    assert isinstance(made, light.LightLM)
    theirs, ours = reference.state_dict(), made.state_dict()
    assert set(ours) == set(theirs)  # the same names (a tied head included), so FastLM and build read the same
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype and torch.equal(ours[name], tensor), name
    assert torch.equal(made.model.rotary_emb.inv_freq, reference.model.rotary_emb.inv_freq)
    ids = list(range(3, 40))
    for a, b in zip(_runs(reference, ids), _runs(made, ids)):
        assert torch.equal(a, b)


def test_a_model_it_does_not_cover_loads_through_transformers(tmp_path):
    from spd_lsp.engine.model import load_model

    config = LlamaConfig(vocab_size=len(tiny_tokenizer()), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})
    directory = _saved(LlamaForCausalLM(config).eval(), tmp_path)
    saved = json.loads((directory / "config.json").read_text())
    assert light.uncovered(saved, [p.name for p in directory.iterdir()]) == "rotary type 'linear'"
    assert light.load(directory, torch.float32) is None
    loaded = load_model(str(directory), device="cpu", dtype="float32", compile=False)
    assert isinstance(loaded.model, LlamaForCausalLM) and loaded.fast["fastPath"]


def test_a_config_of_transformers_4_form_loads_through_transformers(tmp_path):
    """`rope_theta` and `rope_scaling` at the top level (transformers 4's form): only transformers' own config classes
    standardise them, so the light loader must not read the plain config's (missing) `rope_parameters`."""
    from spd_lsp.engine.model import load_model

    directory = _saved(MODELS["llama"](), tmp_path)
    config = json.loads((directory / "config.json").read_text())
    theta = config.pop("rope_parameters")["rope_theta"]
    (directory / "config.json").write_text(json.dumps({**config, "rope_theta": theta, "rope_scaling": None}))
    assert light.load(directory, torch.float32) is None
    loaded = load_model(str(directory), device="cpu", dtype="float32", compile=False)
    assert isinstance(loaded.model, LlamaForCausalLM) and loaded.fast["fastPath"]
    assert loaded.model.config.rope_parameters["rope_theta"] == theta


def test_its_forward_without_a_fast_backend_says_so(tmp_path):
    made = light.load(_saved(MODELS["llama"](), tmp_path), torch.float32)
    with pytest.raises(RuntimeError, match="fast backend"):
        made(input_ids=torch.tensor([[1, 2]]))


@pytest.mark.integration
def test_the_bundled_model_read_from_its_blocks_gives_transformers_logits_bit_for_bit():
    """The bundled GGUF read from its blocks (`gguf_model.py`, on torch's own ops: the plan without our kernels)
    answers as transformers' model of the same file dequantised (bf16), bit for bit: the blocks are the model's own
    numbers; its tokenizer is transformers' of the file."""
    from spd_lsp.engine.fast import gguf_model
    from spd_lsp.engine.model import bundled_gguf, local_directory, resolve_source

    model, tokenizer = gguf_model.load(bundled_gguf(), torch.bfloat16)
    directory = local_directory(resolve_source(None))  # transformers' dequantisation of the same file
    reference = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).eval()
    ids = tokenizer.encode("def fibonacci(n):\n    if n < 2:\n        return n\n    return", add_special_tokens=False)
    for a, b in zip(_runs(reference, ids), _runs(model, ids)):
        assert torch.equal(a, b)
    theirs = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    text = (REPO / "spd_lsp" / "engine" / "model.py").read_text()
    assert tokenizer.get_vocab() == theirs.get_vocab()
    assert tokenizer.encode(text) == theirs.encode(text)


HEAVY = ("transformers.modeling_utils", "transformers.models.llama.modeling_llama",
         "transformers.models.llama.configuration_llama", "torch._dynamo")


@pytest.mark.integration
def test_a_start_imports_neither_transformers_model_code_nor_dynamo():
    """The server's load (the compile off, so that no compile thread imports dynamo meanwhile): transformers' model
    classes (~2 s of imports), `AutoConfig`'s model modules and dynamo (0.5-0.9 s: `mark_dynamic` notes dimensions
    until a compile imports it) stay out of the start."""
    script = ("import sys, json; from spd_lsp.engine.loading import load_local; loaded = load_local(compile=False); "
              f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules] + [type(loaded.engine.runner.model).__name__]))")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["GGUFLM"]
