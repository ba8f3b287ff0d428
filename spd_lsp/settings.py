"""The server's settings: one typed object, parsed leniently from client JSON.

Clients send the same camelCase object as `initializationOptions` and as
`workspace/didChangeConfiguration` -> `{"settings": {"spd": {...}}}`. A bad value
never stops the server: it is reported as a warning and its default is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from spd_lsp import address as engine_address
from spd_lsp.api import METHODS, PAPER_NGRAM_WEIGHTS, DecodeOptions, ModelSpec
from spd_lsp.engine.fast.plan import KERNELS, left_out_of
from spd_lsp.engine.prompt.formats import PROMPT_FORMATS

DECODINGS: tuple[str, ...] = METHODS
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda", "mps")
DTYPES: tuple[str, ...] = ("auto", "float32", "float16", "bfloat16")
QUANTIZE: tuple[str, ...] = ("none", "int8", "int4")  # int4: the fast path's, from float weights
OUTPUT_WEIGHTS: tuple[str, ...] = ("q8", "int8", "float")  # the fast path's output projection in decode steps (CPU)
# How SPD's drafts are verified (decoding/verify.py): cut at the first implausible token, cut and
# continued greedily by the model, or not verified (blends reach the editor).
VERIFY: tuple[str, ...] = ("cut", "continue", "off")
STORE_ORDERS: tuple[int, ...] = (2, 3, 4, 5, 6)
# Multi-line drafts: never, always, or where the cursor opens a block or sits in an empty one (spd_lsp/fit/blocks.py).
MULTILINE: tuple[bool | str, ...] = (False, True, "auto")
MULTILINE_MAX_TOKENS = 32  # validation split: the same keystrokes saved as 64, half the time (docs/quality.md)
# Where snippets come from (spd_lsp/context/): open documents, recently edited ranges, the workspace index.
SOURCES: tuple[str, ...] = ("open", "edited", "workspace")
# The CPU budget, by the rule of evaluation/results/context-budget.md applied on the user's CPU: the largest budget
# whose cold request stays <= 1 s, its prefill within COLD_PREFILL_S (the rest is the request's decode and
# verification) at the prefill rate this engine measured (`spd_lsp/session/prefill_rate.py`). 1,024 where the prefill
# is that fast, else (or before a first measure) 512, which bought the same P@1/P@3 on the study's test split
# (+0.0 points [-1.6, +1.6]); 256 lost P@1 there. Accelerators: 2,048.
CPU_PREFIX_TOKENS = 1024
CPU_FLOOR_PREFIX_TOKENS = 512
COLD_PREFILL_S = 0.8
ACCELERATOR_PREFIX_TOKENS = 2048


@dataclass(frozen=True)
class NgramSettings:
    enabled: bool = True
    orders: tuple[int, ...] = STORE_ORDERS
    weights: dict[int, float] = field(default_factory=lambda: dict(PAPER_NGRAM_WEIGHTS))
    alpha: float = DecodeOptions.alpha
    db: str | None = None  # store directory; None = per-workspace default in the user cache
    index: bool = True  # index workspace folders in the background and watch them
    exclude: tuple[str, ...] = ()  # extra gitignore-style globs
    secret_filter: bool = True  # leave out lines that carry a secret (ngram_db/secrets.py); off: warned


@dataclass(frozen=True)
class ContextSettings:
    """What the prompt holds besides the prefix (`spd_lsp/engine/prompt/`); the suffix goes in whenever the format has FIM."""

    snippets: bool = False  # other files' chunks (off: they did not beat the prefix alone, README)
    header: bool = False  # the file's path (`<filename>`/`<file_sep>` header; off: no gain measured)
    tokens: int = 256  # snippet budget
    suffix_tokens: int = 128  # the text after the cursor, for fill-in-the-middle formats
    sources: tuple[str, ...] = SOURCES  # "open" documents, recently "edited" ranges, the "workspace" index

    def status(self) -> dict[str, Any]:
        return {"snippets": self.snippets, "header": self.header, "tokens": self.tokens,
                "suffixTokens": self.suffix_tokens, "sources": list(self.sources)}


@dataclass(frozen=True)
class Settings:
    k: int = 3
    max_tokens: int = 10
    decoding: str = "superposed"
    temperature: float | None = None  # None = the decoding method's default
    model: str | None = None  # None = the bundled default model
    device: str = "auto"
    dtype: str = "auto"
    quantize: str = "none"
    fast_path: bool = True  # our own forward with a compiled decode step (spd_lsp/engine/fast) where it covers the model
    # the fast path's output projection in CPU decode steps: the GGUF's own Q8_0 blocks (int8 rows where it has none),
    # int8 rows requantised from the float weight, or the float weight
    output_weights: str = "q8"
    # what of the fast path's kernels to leave out ("auto" in the client: none; names of `plan.KERNELS`): the plan
    # resolved at load (engine/fast/plan.py) serves the rest
    kernels: tuple[str, ...] = ()
    max_prefix_tokens: int | None = None  # None = by the device and its prefill rate (`prefix_budget`)
    multiline: bool | str = False  # one of MULTILINE
    multiline_max_tokens: int = MULTILINE_MAX_TOKENS  # the tokens of a draft "auto" lets span lines
    verify: str = "cut"
    ngrams: NgramSettings = field(default_factory=NgramSettings)
    # Where decoding runs (spd_lsp/remote): "in-process", "auto" (one shared engine per user
    # and machine, started on demand) or an address: unix:/path, tcp://host:port, tls://host:port.
    engine: str = "auto"
    engine_token_file: str | None = None  # TCP/TLS engines: the token file (else $SPD_LSP_TOKEN)
    engine_certificate: str | None = None  # TLS engines: the certificate (or CA) to trust
    engine_standby: bool = True  # "auto": the engine keeps a forked spare that takes over if it dies (remote/standby.py)
    prompt_format: str = "auto"  # "auto": the tokenizer's own family (spd_lsp/engine/prompt/formats.py)
    context: ContextSettings = field(default_factory=ContextSettings)
    # Content exclusion: documents whose path matches one of these gitignore-style globs are never completed
    # nor read (not the prompt, not snippets, not the store); None = the indexer's secret-file names
    # (`ngram_db.ignore.SECRET_PATTERNS`: `.env*`, keys, certificates, credentials).
    exclude: tuple[str, ...] | None = None

    def decode_options(self, *, block: bool = False) -> DecodeOptions:
        """The options of a request; `block`: one that `multiline` "auto" lets span lines (the cursor starts
        an empty block), with `multiline_max_tokens`."""
        defaults = DecodeOptions()
        return DecodeOptions(
            method=self.decoding,
            k=self.k,
            max_tokens=self.multiline_max_tokens if block else self.max_tokens,
            temperature=defaults.temperature if self.temperature is None else self.temperature,
            alpha=self.ngrams.alpha if self.ngrams.enabled else 0.0,
            ngram_weights={n: self.ngrams.weights[n] for n in self.ngrams.orders},
            stop_at_newline=not (block or self.multiline is True),  # "auto": per request (spd_lsp/fit/blocks.py)
            verify_rounds=0 if self.verify == "off" else defaults.verify_rounds,
            verify_repair="continue" if self.verify == "continue" else defaults.verify_repair,
        )

    def prefix_budget(self, device_type: str, prefill_tokens_per_s: float | None = None) -> int:
        """The prompt's prefix budget in tokens: `maxPrefixTokens` where set; on an accelerator 2,048; on the CPU
        1,024 where its measured prefill rate (None: not measured yet) fills it within COLD_PREFILL_S, else 512."""
        if self.max_prefix_tokens is not None:
            return self.max_prefix_tokens
        if device_type != "cpu":
            return ACCELERATOR_PREFIX_TOKENS
        if prefill_tokens_per_s is not None and CPU_PREFIX_TOKENS / prefill_tokens_per_s <= COLD_PREFILL_S:
            return CPU_PREFIX_TOKENS
        return CPU_FLOOR_PREFIX_TOKENS

    def model_spec(self) -> ModelSpec:
        """The model these settings load (in process, or in the shared engine they start)."""
        return ModelSpec(path=self.model, device=self.device, dtype=self.dtype, quantize=self.quantize,
                         head=self.output_weights, fast_path=self.fast_path, kernels=self.kernels)

    def model_key(self) -> tuple[object, ...]:
        """What a model load depends on: a change here means a reload."""
        return self.model_spec(), self.engine, self.engine_token_file, self.engine_certificate


class _Invalid(ValueError):
    pass


Check = Callable[[Any], Any]


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("expected true or false")
    return value


def _integer(lo: int, hi: int) -> Check:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise _Invalid(f"expected an integer from {lo} to {hi}")
        return value

    return check


def _number(lo: float, hi: float) -> Check:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise _Invalid(f"expected a number from {lo} to {hi}")
        return float(value)

    return check


def _choice(options: tuple[str, ...]) -> Check:
    def check(value: Any) -> str:
        if value not in options:
            raise _Invalid("expected one of " + ", ".join(repr(o) for o in options))
        return value

    check.choices = options  # type: ignore[attr-defined]  # the command line offers them (commands/flags.py)
    return check


def _multiline(value: Any) -> bool | str:
    if value not in MULTILINE or (value in (0, 1) and not isinstance(value, bool)):
        raise _Invalid("expected true, false or \"auto\"")
    return value


_multiline.choices = MULTILINE  # type: ignore[attr-defined]  # the command line offers them (commands/flags.py)


def _optional(inner: Check) -> Check:
    return lambda value: None if value is None else inner(value)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid("expected a non-empty string")
    return value


def _orders(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or any(v not in STORE_ORDERS for v in value):
        raise _Invalid(f"expected a non-empty list of orders from {STORE_ORDERS}")
    return tuple(sorted(set(value)))


def _weights(value: Any) -> dict[int, float]:
    """A list aligned with `orders`' default (2..6) or an object {"2": 0.01, ...}."""
    if isinstance(value, list):
        value = dict(zip(STORE_ORDERS, value, strict=True)) if len(value) == len(STORE_ORDERS) else None
    if not isinstance(value, Mapping):
        raise _Invalid(f"expected an object from order to weight or a list of {len(STORE_ORDERS)} numbers")
    weights = {}
    for key, weight in value.items():
        order = int(key) if str(key).isdigit() else None
        if order not in STORE_ORDERS:
            raise _Invalid(f"unknown order {key!r}")
        weights[order] = _number(0.0, 1.0)(weight)
    return {**PAPER_NGRAM_WEIGHTS, **weights}


def _sources(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or any(v not in SOURCES for v in value):
        raise _Invalid(f"expected a list of sources from {SOURCES}")
    return tuple(dict.fromkeys(value))


def _kernels(value: Any) -> tuple[str, ...]:
    """"auto" (every kernel where it serves) or a list of kernels to leave out (`plan.KERNELS`)."""
    if value == "auto":
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Invalid(f'expected "auto" or a list of kernels to leave out, of {", ".join(KERNELS)}')
    try:
        return left_out_of(value)
    except ValueError as exc:
        raise _Invalid(str(exc).removeprefix("kernels: ")) from exc


def _globs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Invalid("expected a list of glob strings")
    return tuple(value)


NGRAM_KEYS: dict[str, tuple[str, Check]] = {
    "enabled": ("enabled", _boolean),
    "orders": ("orders", _orders),
    "weights": ("weights", _weights),
    "alpha": ("alpha", _number(0.0, 1.0)),
    "db": ("db", _optional(_text)),
    "index": ("index", _boolean),
    "exclude": ("exclude", _globs),
    "secretFilter": ("secret_filter", _boolean),
}

CONTEXT_KEYS: dict[str, tuple[str, Check]] = {
    "snippets": ("snippets", _boolean),
    "header": ("header", _boolean),
    "tokens": ("tokens", _integer(0, 8192)),
    "suffixTokens": ("suffix_tokens", _integer(0, 8192)),
    "sources": ("sources", _sources),
}
SECTIONS = ("ngrams", "context")  # nested objects, parsed with their own keys

KEYS: dict[str, tuple[str, Check]] = {
    "k": ("k", _integer(1, 16)),
    "maxTokens": ("max_tokens", _integer(1, 256)),
    "decoding": ("decoding", _choice(DECODINGS)),
    "temperature": ("temperature", _optional(_number(0.0, 10.0))),
    "model": ("model", _optional(_text)),
    "device": ("device", _choice(DEVICES)),
    "dtype": ("dtype", _choice(DTYPES)),
    "quantize": ("quantize", _choice(QUANTIZE)),
    "fastPath": ("fast_path", _boolean),
    "outputWeights": ("output_weights", _choice(OUTPUT_WEIGHTS)),
    "kernels": ("kernels", _kernels),
    "maxPrefixTokens": ("max_prefix_tokens", _optional(_integer(16, 32768))),
    "multiline": ("multiline", _multiline),
    "multilineMaxTokens": ("multiline_max_tokens", _integer(1, 512)),
    "verify": ("verify", _choice(VERIFY)),
    "engine": ("engine", engine_address.check_setting),
    "engineTokenFile": ("engine_token_file", _optional(_text)),
    "engineCertificate": ("engine_certificate", _optional(_text)),
    "engineStandby": ("engine_standby", _boolean),
    "promptFormat": ("prompt_format", _choice(PROMPT_FORMATS)),
    "exclude": ("exclude", _optional(_globs)),
}
# The settings that choose the model (`Settings.model_spec`): `spd-lsp engine`'s model flags (commands/engine.py).
MODEL_KEYS: tuple[str, ...] = ("model", "device", "dtype", "quantize", "outputWeights", "fastPath", "kernels")

# The decode options the settings reach, with the check of the setting that bounds each: the shared engine refuses a
# request outside them (remote/server.py), so no client asks it for more than a setting could.
OPTION_CHECKS: dict[str, Check] = {
    "k": KEYS["k"][1], "max_tokens": KEYS["maxTokens"][1], "temperature": KEYS["temperature"][1],
    "alpha": NGRAM_KEYS["alpha"][1], "ngram_weights": NGRAM_KEYS["weights"][1],
}


def check_options(options: DecodeOptions) -> None:
    """ValueError naming the first option outside the bounds of the setting that reaches it (`OPTION_CHECKS`)."""
    wire = options.to_dict()
    for name, check in OPTION_CHECKS.items():
        try:
            check(wire[name])
        except (_Invalid, TypeError, ValueError) as exc:
            raise ValueError(f"decode option {name}={wire[name]!r}: {exc}") from exc


# Every setting: (section, its keys, its dataclass); "" is the top level.
SCHEMA: tuple[tuple[str, Mapping[str, tuple[str, Check]], type], ...] = (
    ("", KEYS, Settings), ("ngrams", NGRAM_KEYS, NgramSettings), ("context", CONTEXT_KEYS, ContextSettings),
)


def _parse_fields(raw: Any, keys: Mapping[str, tuple[str, Check]], where: str, warnings: list[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        warnings.append(f"{where or 'settings'}: expected an object, got {type(raw).__name__}; using defaults")
        return {}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{where}.{key}" if where else key
        if key not in keys:
            if not (where == "" and key in SECTIONS):
                warnings.append(f"{name}: unknown setting, ignored")
            continue
        attribute, check = keys[key]
        try:
            values[attribute] = check(value)
        except (_Invalid, TypeError, ValueError) as exc:
            warnings.append(f"{name}: {exc} (got {value!r}); using the default")
    return values


def parse_settings(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from a client object (missing keys keep defaults) and the warnings to show."""
    warnings: list[str] = []
    top = _parse_fields(raw, KEYS, "", warnings)
    ngram_raw = raw.get("ngrams") if isinstance(raw, Mapping) else None
    ngrams = NgramSettings(**_parse_fields(ngram_raw, NGRAM_KEYS, "ngrams", warnings))
    context_raw = raw.get("context") if isinstance(raw, Mapping) else None
    context = ContextSettings(**_parse_fields(context_raw, CONTEXT_KEYS, "context", warnings))
    return Settings(**top, ngrams=ngrams, context=context), warnings


def settings_from_configuration(params_settings: Any) -> tuple[Settings, list[str]]:
    """`didChangeConfiguration` carries {"spd": {...}}; some clients send the object bare."""
    if isinstance(params_settings, Mapping) and "spd" in params_settings:
        return parse_settings(params_settings["spd"])
    return parse_settings(params_settings)
