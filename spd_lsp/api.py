"""Value types shared by every layer: the request from the session to the engine, its result, the
engine interface, and the registry of decoding methods. Plain values only (no torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from types import UnionType
from typing import Any, Callable, Literal, Protocol, Union, get_args, get_origin, get_type_hints


@dataclass(frozen=True)
class Method:
    """A decoding method as every layer sees it (the step states themselves: engine/decoding/methods.py)."""

    name: str
    batched: bool  # the engine's batch steps it together with other requests; else it runs alone


# The product's decoding methods: the values of the `decoding` setting (and the CLI's --decoding).
METHODS: tuple[str, ...] = ("superposed", "greedy", "nucleus", "beam")
# The registry the engine and the batcher read: the product's methods, and those a benchmark registers in its own
# process (`engine.decoding.methods.register`; bench/baselines.py's batched nucleus).
METHOD: dict[str, Method] = {m.name: m for m in (
    Method("superposed", batched=True),  # one row per request: the superposition of its k drafts
    Method("greedy", batched=True),
    Method("nucleus", batched=False),  # k sequential samples, as in the paper's baseline
    Method("beam", batched=True),
)}

# The paper's n-gram weights per order (Superposed Decoding, Shen et al. 2024, and its reference code).
PAPER_NGRAM_WEIGHTS: dict[int, float] = {2: 0.01, 3: 0.04, 4: 0.15, 5: 0.18, 6: 0.12}


class Cancelled(Exception):
    """Raised inside a decode loop when the caller's `cancelled()` turns true."""


@dataclass(frozen=True)
class Experimental:
    """The knobs of studies and benchmarks (evaluation/, bench/), kept apart from the product's options: no setting
    reaches them and the product runs their defaults. On the wire only the fields set away from their defaults travel
    (`to_dict`), and an engine that does not know one refuses the request (remote/protocol.py, compatibility)."""

    # Unseen n-gram candidates pay log δ instead of vanishing (the paper's rule, drop_unsupported=True, cost
    # accepted characters on held-out code: docs/quality.md).
    log_delta: float = -1.5
    drop_unsupported: bool = False
    candidate_pool: int | None = None  # LM candidates kept per draft and step; None = 3k
    reset_every: int | None = None  # the paper's 5.3: re-feed the best draft every s steps
    heal: bool = True  # token healing at the prefix boundary
    top_p: float = 0.9  # nucleus baselines
    nucleus_temperature: float = 1.0  # nucleus baselines sample at the model's own temperature
    seed: int | None = None
    # Verification (decoding/verify.py), beyond what the `verify` setting chooses:
    verify_top: int | None = 5  # a token outside the model's top m at its position is implausible
    verify_log_ratio: float = -3.0  # ... and so is one with log p below the best token's + this
    verify_gate: float | None = 1.5  # drop drafts this many nats/token below the best one; None = keep
    # "keep": SPD's top draft stays first and whole (only ranks 2..k are cut, repaired, ranked and gated against
    # it); "cut": it stays first but is cut too; "rank": every shown draft is cut and re-ranked.
    verify_first: Literal["rank", "keep", "cut"] = "cut"
    verify_score: Literal["mean", "total"] = "total"  # rank drafts by exact total or mean log p (with n-grams)
    # When verification leaves no draft (every one cut to nothing): show "none", or SPD's unverified "top" draft.
    verify_empty: Literal["none", "top"] = "none"
    # Who chooses a draft's last token when the drafts run to max_tokens: "step", a superposed step (the paper);
    # "tree": verification's exact forward, which runs at every draft token anyway, gives the model's own choice
    # there, so the pass ends one step sooner (decoding/verify.py `closes_drafts`). Only where every shown draft is
    # judged and cut ("jacobi" repair); elsewhere "step".
    last_token: Literal["step", "tree"] = "tree"

    def to_dict(self) -> dict[str, Any]:
        """The fields set away from their defaults (the wire form: only those travel)."""
        defaults = Experimental()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(defaults, f.name)}

    @classmethod
    def from_dict(cls, values: Any) -> "Experimental":
        """The inverse of `to_dict`; unknown keys or bad types raise ValueError (an experiment never runs as another)."""
        if not isinstance(values, dict):
            raise ValueError("experimental decode options must be a map")
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown experimental decode options: {', '.join(map(str, unknown))}")
        return cls(**_checked(cls, values))


@dataclass(frozen=True)
class DecodeOptions:
    """What a decoding method needs besides the prefix: the product's options (those the settings reach,
    `Settings.decode_options`) and the `experimental` ones of studies and benchmarks."""

    method: str = "superposed"
    k: int = 3
    max_tokens: int = 10
    temperature: float = 0.06
    alpha: float = 0.54
    ngram_weights: dict[int, float] = field(default_factory=lambda: dict(PAPER_NGRAM_WEIGHTS))
    stop_at_newline: bool = True  # single-line drafts (LSP `multiline` false)
    # Verification (superposed only, decoding/verify.py): one exact forward over the drafts.
    # 0 = off; 1 = rank and cut each draft at its first implausible token; n > 1 = repair that
    # token with the model's choice and re-verify, at most n - 1 times, then cut.
    verify_rounds: int = 1
    # How a draft cut at its first implausible token is repaired (verify_rounds >= 2 for "jacobi"):
    # "jacobi": the model's choice in its place, the rest kept as a guess and verified again (bounded rounds);
    # "continue": the model's choice in its place, then greedy decoding with the real model up to
    # max_tokens / the draft stop rules (decoding/continuation.py; verify_rounds >= 1, one pass).
    verify_repair: Literal["jacobi", "continue"] = "jacobi"
    experimental: Experimental = Experimental()

    @property
    def pool(self) -> int:
        return self.experimental.candidate_pool or 3 * self.k

    def step_budget(self, healed_text: str) -> int:
        """Tokens to generate: max_tokens new ones, plus one to re-produce healed text."""
        return self.max_tokens + (1 if healed_text else 0)

    @classmethod
    def of(cls, **values: Any) -> "DecodeOptions":
        """Options from flat names, product and experimental alike (studies, benchmarks, tests):
        `DecodeOptions.of(k=3, seed=0)`."""
        return cls().but(**values)

    def but(self, **values: Any) -> "DecodeOptions":
        """These options with `values` (flat names, product or experimental) in place."""
        product = {f.name for f in fields(self)} - {"experimental"}
        unknown = sorted(set(values) - product - set(EXPERIMENTAL_FIELDS))
        if unknown:
            raise TypeError(f"unknown decode options: {', '.join(unknown)}")
        experimental = {name: value for name, value in values.items() if name not in product}
        mine = {name: value for name, value in values.items() if name in product}
        return replace(self, **mine, experimental=replace(self.experimental, **experimental))

    def flat(self) -> dict[str, Any]:
        """Every option by its flat name (`of`'s inverse)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "experimental"}
        return {**values, **{name: getattr(self.experimental, name) for name in EXPERIMENTAL_FIELDS}}

    def to_dict(self) -> dict[str, Any]:
        """Plain values for the engine protocol: every product option (n-gram orders as string keys), and
        `experimental` with the experimental ones set away from their defaults, where there are any."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "experimental"}
        values["ngram_weights"] = {str(n): w for n, w in self.ngram_weights.items()}
        experimental = self.experimental.to_dict()
        return {**values, "experimental": experimental} if experimental else values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "DecodeOptions":
        """The inverse of `to_dict`; missing keys take defaults, keys it does not know are ignored (`ignored`: a
        newer front end's product options), bad types and unknown experimental options raise ValueError."""
        if not isinstance(values, dict):
            raise ValueError("decode options must be a map")
        values = {name: value for name, value in values.items() if name in OPTION_FIELDS}
        experimental = Experimental.from_dict(values.pop("experimental", {}))
        if "ngram_weights" in values:
            try:
                values["ngram_weights"] = {int(n): float(w) for n, w in values["ngram_weights"].items()}
            except (AttributeError, TypeError, ValueError) as exc:
                raise ValueError(f"ngram_weights must map orders to weights: {exc}") from exc
        return cls(**_checked(cls, values), experimental=experimental)

    @staticmethod
    def ignored(values: Any) -> list[str]:
        """The keys of a wire form `from_dict` ignores."""
        return sorted(map(str, set(values) - set(OPTION_FIELDS))) if isinstance(values, dict) else []


def _checked(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` for `cls`'s fields, each of its field's type and, for a Literal field, one of its values."""
    hints = get_type_hints(cls)
    for name, value in values.items():
        hint = hints[name]
        if get_origin(hint) is Literal:
            if value not in get_args(hint):
                raise ValueError(f"decode option {name}={value!r} is not one of {', '.join(get_args(hint))}")
        elif not _fits(value, hint):
            raise ValueError(f"decode option {name}={value!r} has the wrong type")
    return values


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` is of type `hint` (a float field takes an int too; a bool is no number)."""
    if get_origin(hint) in (Union, UnionType):
        return any(_fits(value, kind) for kind in get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, get_origin(hint) or hint)


EXPERIMENTAL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Experimental))
OPTION_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(DecodeOptions))


@dataclass
class Timings:
    """Seconds spent per phase; steps counts model forward calls after prefill.

    A shared engine's request also says where its time went outside the model thread's decode (`total_s`):
    `queue_s`, from the engine reading its frame to its model thread taking it up (part of `total_s`);
    `served_s`, from that frame read to its answer written (the engine's whole time); `round_trip_s`, the
    front end's, from its frame sent to the answer read: the socket costs `round_trip_s - served_s`.
    In process the three stay 0."""

    prefill_s: float = 0.0
    model_s: float = 0.0
    ngram_s: float = 0.0
    verify_s: float = 0.0  # the verification forward(s) with their n-gram look-ups
    total_s: float = 0.0
    steps: int = 0
    prefill_tokens: int = 0
    reused_tokens: int = 0
    queue_s: float = 0.0
    served_s: float = 0.0
    round_trip_s: float = 0.0

    @property
    def per_step_ms(self) -> float:
        return 1000.0 * self.model_s / self.steps if self.steps else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Timings":
        """Known keys only (a newer engine may report more phases)."""
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in values.items() if name in known})


@dataclass
class Draft:
    """One completion draft: text excludes the healed part of the prefix."""

    text: str
    token_ids: list[int]
    score: float  # length-normalised log-probability (higher is better)
    finished: bool = False  # ended by a stop token / end of line


@dataclass
class DecodeResult:
    drafts: list[Draft]
    timings: Timings
    method: str
    prompt: dict[str, Any] = field(default_factory=dict)  # format and token counts per part (prompt/build.py)


@dataclass(frozen=True)
class PromptContext:
    """What the prompt may hold besides the prefix, as plain values from the session."""

    suffix: str = ""  # the text after the cursor, already cut to its budget
    filename: str | None = None  # the current file's path relative to its workspace folder
    snippets: tuple[tuple[str, str], ...] = ()  # (path, code) of other files, best first, within budget
    language: str | None = None  # LSP language id of the current file (comment syntax)


@dataclass(frozen=True)
class DecodeRequest:
    """One completion request, built once by the session and carried unchanged to the engine: through
    `LocalEngine`, over the engine protocol (`to_dict`/`from_dict`) and through the batcher.

    `ids`, where given, are the prefix's tokens (the caller tokenized it already). `prompt_format`
    ("auto": the tokenizer's own family, engine/prompt/formats.py) lays `context` out around the prefix.
    """

    prefix: str
    options: DecodeOptions = field(default_factory=lambda: DecodeOptions())
    ids: tuple[int, ...] | None = None
    context: PromptContext = PromptContext()
    prompt_format: str = "auto"
    # Speculative work nobody waits for yet (the drafts after the top one, as if accepted): a shared engine runs it
    # only while no other request waits, and puts it back for any that comes. In process the session's worker does.
    background: bool = False

    def __post_init__(self) -> None:
        if self.ids is not None and not isinstance(self.ids, tuple):
            object.__setattr__(self, "ids", tuple(self.ids))

    def to_dict(self) -> dict[str, Any]:
        """Plain values for the engine protocol (its REQUEST, remote/protocol.py)."""
        c = self.context
        return {"prefix": self.prefix, "ids": None if self.ids is None else list(self.ids), "suffix": c.suffix,
                "filename": c.filename, "snippets": [list(s) for s in c.snippets], "language": c.language,
                "prompt_format": self.prompt_format, "options": self.options.to_dict(),
                **({"background": True} if self.background else {})}

    @classmethod
    def from_dict(cls, values: Any) -> "DecodeRequest":
        """The inverse of `to_dict`; missing keys but `prefix` take defaults; keys it does not know are ignored
        (`ignored`: a newer front end's optional fields); bad types raise ValueError."""
        if not isinstance(values, dict):
            raise ValueError("the request must be a map")
        if not isinstance(values.get("prefix"), str):
            raise ValueError("the request needs a string 'prefix'")
        for name, kinds in REQUEST_FIELDS.items():
            if name in values and not isinstance(values[name], kinds):
                raise ValueError(f"request field {name!r} has the wrong type")
        ids, snippets = values.get("ids"), values.get("snippets") or []
        if ids is not None and not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValueError("request field 'ids' must be a list of token ids")
        if not all(isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(p, str) for p in s) for s in snippets):
            raise ValueError("request field 'snippets' must be a list of [path, code] pairs")
        context = PromptContext(values.get("suffix") or "", values.get("filename"),
                                tuple((path, code) for path, code in snippets), values.get("language"))
        return cls(values["prefix"], DecodeOptions.from_dict(values.get("options") or {}),
                   None if ids is None else tuple(ids), context, values.get("prompt_format") or "auto",
                   bool(values.get("background", False)))

    @staticmethod
    def ignored(values: Any) -> list[str]:
        """What `from_dict` ignores of a wire form, as `field` and `options.field`."""
        if not isinstance(values, dict):
            return []
        options = [f"options.{name}" for name in DecodeOptions.ignored(values.get("options"))]
        return sorted(map(str, set(values) - set(REQUEST_FIELDS))) + options


# The wire fields of a request and the types each may hold (`DecodeRequest.from_dict`).
REQUEST_FIELDS: dict[str, tuple[type, ...]] = {
    "prefix": (str,), "ids": (list, type(None)), "suffix": (str,), "filename": (str, type(None)),
    "snippets": (list,), "language": (str, type(None)), "prompt_format": (str,), "options": (dict,),
    "background": (bool,),
}


@dataclass(frozen=True)
class ModelSpec:
    """Which model an engine loads, and how: one value for the settings (`Settings.model_spec`), the shared engine's
    command line and socket (`remote/daemon.py`), `spd-lsp engine`, the Ray replicas and `engine.loading.load_local`."""

    path: str | None = None  # None: the bundled default; else a .gguf file or a local Hugging Face directory
    device: str = "auto"  # "auto", "cpu", "cuda", "mps"
    dtype: str = "auto"
    quantize: str = "none"  # "none", "int8", "int4"
    head: str = "q8"  # the fast path's output projection in CPU decode steps: "q8", "int8" or "float"
    fast_path: bool = True  # our own forward with a compiled decode step where it covers the model (engine/fast)
    kernels: tuple[str, ...] = ()  # the fast path's kernels to leave out (engine/fast/plan.py `KERNELS`)


@dataclass
class Loaded:
    """An engine ready to answer, and what `spd.status` says of its model."""

    engine: "EngineLike"
    info: dict[str, Any]  # name, source, device, dtype, loadSeconds (a shared engine: its address, pid)
    device_type: str


CancelCheck = Callable[[], bool]


class EngineLike(Protocol):
    """What the session needs of an engine: `engine.local.LocalEngine` in process, `remote.client.RemoteEngine`
    over a socket (and the fakes of tests)."""

    tokenizer: Any

    def complete(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> DecodeResult:
        """Drafts for `request`; `result.prompt` says what went in."""

    def warm(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> int:
        """Prefill the prompt `complete` would run for `request` and draft nothing; the tokens run."""

    def set_ngrams(self, ngrams: Any) -> None:
        """The workspace's n-gram source (an `ngram_db.NgramSource`), or None."""

    def close(self) -> None:
        """Release what the engine holds for this session (a shared engine's connection)."""

    def link(self) -> dict[str, Any]:
        """For `spd.status`: the engine's address, whether its connection is up, and the requests answered
        empty because it was gone (in process: no address, None, 0)."""


def never_cancelled() -> bool:
    """The `CancelCheck` of work nobody can cancel."""
    return False
