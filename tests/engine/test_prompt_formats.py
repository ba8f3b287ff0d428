"""Prompt formats: each family recognised from its tokenizer's tokens and laid out exactly."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from spd_lsp.engine.decoding.healing import TokenTable
from spd_lsp.engine.decoding.lm import common_prefix_length
from spd_lsp.api import DecodeOptions, DecodeRequest, PromptContext
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import LoadedModel
from spd_lsp.engine.prompt.build import stop_ids
from spd_lsp.engine.prompt.formats import detect, resolve
from tests.tiny_models import tiny_model, tiny_tokenizer

# Each family's control tokens as its tokenizer declares them (a subset is enough to be recognised).
FAMILIES: dict[str, list[str]] = {
    "qwen": ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
             "<|endoftext|>"],
    "codegemma": ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_separator|>"],
    "starcoder": ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<repo_name>",
                  "<file_sep>", "<issue_start>"],
    "starcoder1": ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>",
                   "<gh_stars>"],
    "deepseek": ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>"],
    "codellama": ["▁<PRE>", "▁<MID>", "▁<SUF>", "▁<EOT>"],
    "codestral": ["[INST]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]"],
    "file_sep": ["<|endoftext|>", "<repo_name>", "<reponame>", "<file_sep>", "<filename>", "<gh_stars>"],  # SmolLM2
    "filename": ["<|endoftext|>", "<reponame>", "<filename>", "<gh_stars>"],  # StarCoder 1 metadata, no FIM
    "prefix": ["<|im_start|>", "<|im_end|>"],
}

CONTEXT = PromptContext(suffix=")\nprint(y)\n", filename="pkg/a.py", snippets=(("pkg/b.py", "def g(n):\n    return n\n"),),
                  language="python")
PREFIX = "y = g("
OTHER = "pkg/b.py\ndef g(n):\n    return n\n"
COMMENTED = "# pkg/b.py\ndef g(n):\n    return n\n# pkg/a.py\n"
EXPECTED: dict[str, str] = {
    # Qwen2.5-Coder README, repository-level completion with FIM.
    "qwen": f"<|file_sep|>{OTHER}\n<|file_sep|>pkg/a.py\n<|fim_prefix|>y = g(<|fim_suffix|>)\nprint(y)\n<|fim_middle|>",
    "codegemma": f"<|fim_prefix|>{COMMENTED}y = g(<|fim_suffix|>)\nprint(y)\n<|fim_middle|>",
    # StarCoder2: the FIM file's path inside <fim_prefix>.
    "starcoder": f"<file_sep>{OTHER}<file_sep><fim_prefix>pkg/a.py\ny = g(<fim_suffix>)\nprint(y)\n<fim_middle>",
    "starcoder1": f"<fim_prefix>{COMMENTED}y = g(<fim_suffix>)\nprint(y)\n<fim_middle>",
    "deepseek": f"<｜begin▁of▁sentence｜><｜fim▁begin｜>{COMMENTED}y = g(<｜fim▁hole｜>)\nprint(y)\n<｜fim▁end｜>",
    "codellama": f"▁<PRE>{COMMENTED}y = g(▁<SUF>)\nprint(y)\n▁<MID>",
    "codestral": f"[SUFFIX])\nprint(y)\n[PREFIX]{COMMENTED}y = g(",  # suffix first: the prefix ends the prompt
    "file_sep": f"<file_sep>{OTHER}<file_sep>pkg/a.py\ny = g(",
    "filename": "<filename>pkg/a.py\ny = g(",
    "prefix": "y = g(",
}


def family_tokenizer(family: str) -> PreTrainedTokenizerFast:
    """The tiny BPE with `family`'s control tokens added as special tokens (DeepSeek's BOS added first)."""
    backend = copy.deepcopy(tiny_tokenizer().backend_tokenizer)
    tokens = FAMILIES[family]
    extra = {"bos_token": tokens[0], "add_bos_token": True} if family == "deepseek" else {}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", **extra)
    tokenizer.add_special_tokens({"additional_special_tokens": tokens})
    return tokenizer


def family_engine(family: str) -> LocalEngine:
    tokenizer = family_tokenizer(family)
    loaded = tiny_model("llama")
    loaded.model.resize_token_embeddings(len(tokenizer))
    return LocalEngine(LoadedModel(model=loaded.model, tokenizer=tokenizer, device=torch.device("cpu"),
                              dtype=torch.float32, name=f"tiny-{family}", source="in-memory", load_s=0.0))


def prompt_engine(family: str) -> LocalEngine:
    """An engine without a model: building a prompt needs only the tokenizer and its token table."""
    tokenizer = family_tokenizer(family)
    engine = LocalEngine.__new__(LocalEngine)
    engine.tokenizer, engine.table, engine._formats = tokenizer, TokenTable(tokenizer, len(tokenizer)), {}
    return engine


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_format_is_recognised_from_the_tokenizer_tokens(family: str) -> None:
    assert detect(family_tokenizer(family)).name == family


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_gets_its_exact_template(family: str) -> None:
    engine = prompt_engine(family)
    tokenizer = engine.tokenizer
    prompt = engine.prompt(DecodeRequest(PREFIX, DecodeOptions.of(heal=False), context=CONTEXT))
    assert prompt.format == family
    assert tokenizer.decode(prompt.healed.prompt_ids) == EXPECTED[family]


@pytest.mark.parametrize("family, tail", [("qwen", "<|fim_middle|>"), ("codestral", "y = g"), ("file_sep", "y = g")])
def test_healing_backs_up_the_prefix_last_token_wherever_the_prefix_sits(family: str, tail: str) -> None:
    """Prefix-suffix-middle: the boundary token leaves the prefix section and the middle must start with it."""
    engine = prompt_engine(family)
    tokenizer = engine.tokenizer
    healed = engine.prompt(DecodeRequest(PREFIX, context=CONTEXT)).healed
    text = tokenizer.decode(healed.prompt_ids)
    assert healed.remainder == "("
    assert text.endswith(tail)
    assert "y = g(" not in text and "y = g" in text


def test_a_forced_format_the_tokenizer_cannot_express_falls_back_to_the_prefix_with_a_warning() -> None:
    fmt, warning = resolve(family_tokenizer("prefix"), "qwen")
    assert fmt.name == "prefix" and warning and "<|fim_prefix|>" in warning
    assert resolve(family_tokenizer("qwen"), "prefix") == (resolve(family_tokenizer("prefix"))[0], None)
    with pytest.raises(ValueError, match="unknown prompt format"):
        resolve(family_tokenizer("qwen"), "nonsense")


@pytest.mark.parametrize("family, reaches", [("qwen", True), ("codestral", True), ("file_sep", False), ("prefix", False)])
def test_the_suffix_reaches_the_model_only_with_fill_in_the_middle(family: str, reaches: bool) -> None:
    """A real (tiny) model and runner: the cached prompt holds the suffix's tokens or not."""
    engine = family_engine(family)
    suffix = "\nresult = compute(total)\n"
    engine.complete(DecodeRequest("def add(a, b):\n    return ", DecodeOptions(k=2, max_tokens=2),
                                 context=PromptContext(suffix=suffix, filename="a.py")))
    fed = engine.tokenizer.decode(engine.runner.cached_ids)
    assert ("result = compute(total)" in fed) is reaches


@pytest.mark.parametrize("family, stops", [("qwen", {"<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>"}),
                                           ("codellama", {"▁<EOT>"}), ("codegemma", {"<|file_separator|>", "<eos>"}),
                                           ("file_sep", {"<file_sep>"}), ("prefix", set())])
def test_a_draft_ends_at_the_format_end_tokens_instead_of_never_using_them(family: str, stops: set[str]) -> None:
    """Special tokens are banned from drafts unless they stop them: the end of the middle must stop one."""
    tokenizer = family_tokenizer(family)
    fmt = detect(tokenizer)
    assert {tokenizer.convert_ids_to_tokens(i) for i in stop_ids(fmt, tokenizer)} == stops


def test_end_tokens_stop_drafts_only_when_the_prompt_holds_the_format_tokens() -> None:
    """After the bare prefix `<file_sep>` stays banned, as before context existed."""
    engine = prompt_engine("file_sep")
    assert engine.prompt(DecodeRequest(PREFIX)).structured is False
    assert engine.prompt(DecodeRequest(PREFIX, context=CONTEXT)).structured is True


@pytest.mark.parametrize("family", ["file_sep", "filename", "codestral"])
def test_a_keystroke_re_prefills_only_the_prompt_tail_with_context_before_the_prefix(family: str) -> None:
    """Stable context first: typing keeps the snippets', path's and suffix-first cache (lm.py reuses the common prefix)."""
    engine = prompt_engine(family)
    before = "def add(a, b):\n    total = a + b\n    return t"
    now = engine.prompt(DecodeRequest(before, context=CONTEXT)).healed.prompt_ids
    typed = engine.prompt(DecodeRequest(before + "o", context=CONTEXT)).healed.prompt_ids
    assert len(typed) - common_prefix_length(now, typed) <= 1
    assert common_prefix_length(now, typed) > len(engine.encode(CONTEXT.snippets[0][1]))
