"""Prompt formats per model family, recognised from the tokenizer's own special tokens.

Never from the model's name: a fine-tune or a local copy keeps its tokenizer's
control tokens, not its name. Templates, from each family's public sources:

- Qwen2.5-Coder: `<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>`; repository
  level `<|repo_name|>{repo}\\n<|file_sep|>{path}\\n{code}\\n<|file_sep|>{path}\\n<|fim_prefix|>...`
  (github.com/QwenLM/Qwen2.5-Coder README, "file-level" and "repository-level code completion").
- StarCoder / StarCoder2: `<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>`; StarCoder2's
  repository data `<repo_name>{repo}<file_sep>{path}\\n{code}<file_sep>...` with the FIM file as
  `<file_sep><fim_prefix>{path}\\n{prefix}<fim_suffix>{suffix}<fim_middle>`
  (StarCoder2 paper, arXiv 2402.19173 §5; Continue's `stableCodeFimTemplate`/`starcoder2FimTemplate`
  in its `AutocompleteTemplate.ts`).
- DeepSeek-Coder: `<｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>` after the BOS its
  tokenizer adds; other files as `#{path}` comment blocks (deepseek-ai/DeepSeek-Coder README,
  "code insertion" and "repository level code completion").
- CodeLlama: `<s>▁<PRE> {prefix}▁<SUF>{suffix}▁<MID>`, the tokens `▁<PRE>`/`▁<SUF>`/`▁<MID>`/`▁<EOT>`
  (meta-llama/codellama's `infilling_prompt_tokens`; Tabby's model spec
  `<PRE> {prefix} <SUF>{suffix} <MID>`); the space before the prefix is SentencePiece's dummy
  prefix, which a Llama tokenizer adds itself.
- Codestral: suffix first, `[SUFFIX]{suffix}[PREFIX]{prefix}` (mistral-common `encode_fim`;
  Continue's `codestralMultifileFimTemplate`, which also puts other files as `+++++ {path}` blocks).
- CodeGemma: `<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>`, ending the middle with
  `<|file_separator|>` (ai.google.dev CodeGemma prompt structure; collama.nvim preset tokens).
- SmolLM2 (and StarCoder2 without FIM): repository tokens only, `<file_sep>{path}\\n{code}`;
  the older StarCoder metadata `<filename>{path}\\n{code}` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PromptFormat:
    """How one family lays out a prompt; every token named here is a special token of its vocabulary."""

    name: str
    fim: tuple[str, str, str] | None = None  # (prefix, suffix, middle) tokens; None: no fill-in-the-middle
    suffix_first: bool = False  # Codestral: [SUFFIX]{suffix}[PREFIX]{prefix}
    file_sep: str | None = None  # starts each file of the repository (its path, a newline, its code)
    file_end: str = ""  # text after each other file's code (Qwen's "\n")
    path_in_fim: bool = False  # StarCoder2: the current file's path goes inside <fim_prefix>
    header: str | None = None  # token before the current file's path without file separators (`<filename>`)
    comment_files: bool = False  # other files as comment blocks (no file-separator token)
    repo_name: str | None = None  # token before the workspace's name
    stops: tuple[str, ...] = ()  # tokens that end a draft (the end of the middle or of the file)

    def tokens(self) -> tuple[str, ...]:
        named = (*(self.fim or ()), self.file_sep, self.header, self.repo_name, *self.stops)
        return tuple(t for t in named if t)


PLAIN = PromptFormat("prefix")
# Repository tokens without fill-in-the-middle (SmolLM2's pretraining data).
FILE_SEP = PromptFormat("file_sep", file_sep="<file_sep>", stops=("<file_sep>",))
FILENAME = PromptFormat("filename", header="<filename>", stops=("<file_sep>", "<filename>"))
QWEN = PromptFormat(
    "qwen", fim=("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), file_sep="<|file_sep|>", file_end="\n",
    repo_name="<|repo_name|>", stops=("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>"),
)
STARCODER = PromptFormat(
    "starcoder", fim=("<fim_prefix>", "<fim_suffix>", "<fim_middle>"), file_sep="<file_sep>", path_in_fim=True,
    repo_name="<repo_name>", stops=("<|endoftext|>", "<file_sep>", "<fim_pad>"),
)
STARCODER1 = PromptFormat(  # StarCoder 1 / SantaCoder: FIM without file separators
    "starcoder1", fim=("<fim_prefix>", "<fim_suffix>", "<fim_middle>"), comment_files=True,
    stops=("<|endoftext|>", "<fim_pad>"),
)
DEEPSEEK = PromptFormat(
    "deepseek", fim=("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"), comment_files=True,
    stops=("<｜end▁of▁sentence｜>", "<|EOT|>"),
)
CODELLAMA = PromptFormat("codellama", fim=("▁<PRE>", "▁<SUF>", "▁<MID>"), comment_files=True, stops=("▁<EOT>",))
CODESTRAL = PromptFormat("codestral", fim=("[PREFIX]", "[SUFFIX]", ""), suffix_first=True, comment_files=True)
CODEGEMMA = PromptFormat(
    "codegemma", fim=("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), comment_files=True,
    stops=("<|file_separator|>", "<eos>"),
)

# Most specific first: Qwen and CodeGemma share <|fim_prefix|> and differ by their file token;
# StarCoder2 has <file_sep> where StarCoder 1 has not; SmolLM2 has <file_sep> and no FIM.
FORMATS: tuple[PromptFormat, ...] = (
    QWEN, CODEGEMMA, STARCODER, STARCODER1, DEEPSEEK, CODELLAMA, CODESTRAL, FILE_SEP, FILENAME, PLAIN,
)
BY_NAME = {f.name: f for f in FORMATS}
PROMPT_FORMATS: tuple[str, ...] = ("auto", *BY_NAME)
# What a family is known by beyond the tokens it uses in prompts.
_MARKERS: dict[str, tuple[str, ...]] = {"qwen": ("<|file_sep|>",), "codegemma": ("<|file_separator|>",)}


def special_tokens(tokenizer: Any) -> set[str]:
    """The tokenizer's control tokens (declared specials and added tokens), by text."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    return set(tokenizer.all_special_tokens) | {token.content for token in added.values()}


def supports(tokenizer: Any, fmt: PromptFormat) -> bool:
    """Every token the format places (not its stops: a family may lack one of them) is one token here:
    a declared or added control token, or a vocabulary entry (CodeLlama's `▁<PRE>` is one)."""
    have = special_tokens(tokenizer)
    vocab = tokenizer.get_vocab()
    placed = (*(t for t in fmt.fim or () if t), fmt.file_sep, fmt.header, *_MARKERS.get(fmt.name, ()))
    return all(t in have or t in vocab for t in placed if t)


def detect(tokenizer: Any) -> PromptFormat:
    """The most specific format whose tokens this tokenizer has; the prefix alone otherwise."""
    return next(f for f in FORMATS if supports(tokenizer, f))


def resolve(tokenizer: Any, name: str = "auto") -> tuple[PromptFormat, str | None]:
    """The format for a `promptFormat` setting and a warning when a forced one cannot be used."""
    if name == "auto":
        return detect(tokenizer), None
    fmt = BY_NAME.get(name)
    if fmt is None:
        raise ValueError(f"unknown prompt format {name!r}; expected one of {', '.join(PROMPT_FORMATS)}")
    if not supports(tokenizer, fmt):
        return PLAIN, f"promptFormat {name!r}: the tokenizer lacks its tokens ({', '.join(fmt.tokens())}); using the prefix alone"
    return fmt, None
