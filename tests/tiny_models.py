"""Tiny randomly-initialised causal LMs of several architectures, built offline in-process.

Shared by the fast unit tests: a byte-level BPE trained on a few lines of code,
and Llama / GPT-2 / Gemma-3 configs small enough to run a step in milliseconds.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from spd_lsp.engine.decoding.small_query import use_small_query_attention
from spd_lsp.engine.model import LoadedModel

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "for name in names:\n    if name.endswith('.py'):\n        print(name)\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
    "import os\nimport sys\nresult = os.path.join(root, name)\n",
] * 20

ARCHITECTURES = ("llama", "gpt2", "gemma3")
# The Llama model on transformers' forward and on the fast path (spd_lsp/engine/fast, eager: its compile has
# its own test); the equality tests run against both.
LLAMA_BACKENDS = ("llama", "llama+fast")
WITH_FAST = ARCHITECTURES + ("llama+fast",)


@functools.lru_cache(maxsize=1)
def tiny_tokenizer() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,  # it prints to stdout (and panics when stdout is on a full disk)
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>")


def tiny_model(architecture: str, seed: int = 0) -> LoadedModel:
    """`architecture` of ARCHITECTURES, or "llama+fast": the Llama model with the fast backend attached."""
    if architecture.endswith("+fast"):
        from spd_lsp.engine import fast

        loaded = tiny_model(architecture.removesuffix("+fast"), seed)
        fast.attach(loaded.model, fast.build(loaded.model, compile=False))
        loaded.name += "+fast"
        return loaded
    torch.manual_seed(seed)
    tokenizer = tiny_tokenizer()
    vocab = len(tokenizer)
    eos = tokenizer.eos_token_id
    if architecture == "llama":
        config = LlamaConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, eos_token_id=eos, bos_token_id=eos,
        )
        model = LlamaForCausalLM(config)
    elif architecture == "gpt2":
        config = GPT2Config(vocab_size=vocab, n_embd=64, n_layer=2, n_head=4, eos_token_id=eos, bos_token_id=eos)
        model = GPT2LMHeadModel(config)
    elif architecture == "gemma3":  # scales input embeddings by sqrt(hidden) inside the model
        config = Gemma3TextConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, eos_token_id=eos, bos_token_id=eos,
            pad_token_id=eos, sliding_window=512,
        )
        model = Gemma3ForCausalLM(config)
    else:
        raise ValueError(architecture)
    model.eval()
    use_small_query_attention(model)  # as load_model does: the tests run the attention the server runs
    return LoadedModel(
        model=model, tokenizer=tokenizer, device=torch.device("cpu"), dtype=torch.float32,
        name=f"tiny-{architecture}", source="in-memory", load_s=0.0,
    )


def bf16_fast_llama(**switches: bool) -> tuple[Any, Any]:
    """(model, backend): a small bf16 Llama with the bundled model's head size (64) and grouping (3 query heads per
    key/value head) on the fast path, its plan applied as the compile thread applies it before the step's first
    compile (`prepare`: the kernels built), then FastLM's `switches` set (`prompt_kernel`: our prompt attention on or
    off; `pointwise`)."""
    from spd_lsp.engine import fast

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tiny_tokenizer()), hidden_size=192, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=3, num_key_value_heads=1, head_dim=64)
    model = LlamaForCausalLM(config).eval().to(torch.bfloat16)
    backend = fast.build(model, compile=False)
    backend.prepare()
    for name, on in switches.items():
        setattr(backend.lm, name, ("ours" if on else None) if name == "prompt_kernel" else on)
    fast.attach(model, backend)
    return model, backend


def compiling_pair(prompt: list[int]) -> tuple[Any, Any, Any]:
    """The tiny Llama on a fast backend that compiles (as SPD_LSP_COMPILE says), and the same model eager on the fast
    path, `prompt` prefilled in both: (backend, its runner, the eager runner)."""
    from spd_lsp.engine import fast
    from spd_lsp.engine.decoding.lm import ModelRunner

    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=True)
    fast.attach(loaded.model, backend)
    runner = ModelRunner(loaded.model, loaded.device)
    eager = ModelRunner(tiny_model("llama+fast").model, loaded.device)
    for r in (runner, eager):
        r.prefill(prompt)
    return backend, runner, eager


def step_pair(runner: Any, eager: Any, token: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step of `token` on both runners' caches: (the first's logits, the eager one's)."""
    return (runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[token]]))),
            eager.forward(eager.cache, embeds=eager.embed(torch.tensor([[token]]))))
