"""The server's domain state: settings, the engine, the workspace stores, statistics.

Handlers in `server.py` call these methods with plain values (text, positions)
and convert what comes back to LSP types; nothing here knows about pygls. Every
model call runs on the scheduler's single worker thread.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from spd_lsp.config import Settings
from spd_lsp.context import Cursor, TokenSpans, fit_prefix, line_start, locate, offset_of, with_selection
from spd_lsp.decoding.types import CancelCheck, Timings
from spd_lsp.postprocess import Fit, LineEdit, Shown, finalize, line_edits
from spd_lsp.scheduler import Job, Scheduler
from spd_lsp.syntax import language_of
from spd_lsp.workspace import Client, Workspace

log = logging.getLogger(__name__)
SETUP = "setup"  # scheduler key of model (re)loads and store changes: the newest wins


class EngineLike(Protocol):
    """What the session needs of `spd_lsp.engine.Engine` (lets tests use a fake)."""

    tokenizer: Any

    def complete(self, prefix: str, options: Any, cancelled: CancelCheck | None = None) -> Any: ...

    def set_ngrams(self, ngrams: Any) -> None: ...


@dataclass
class Loaded:
    engine: EngineLike
    info: dict[str, Any]  # name, source, device, dtype, load_s
    device_type: str


Loader = Callable[[Settings], Loaded]


def load_engine(settings: Settings) -> Loaded:
    """The real model and engine, imported lazily so the server answers `initialize` at once."""
    from spd_lsp.engine import Engine
    from spd_lsp.model import load_model

    loaded = load_model(settings.model, settings.device, settings.dtype, settings.quantize)
    info = {
        "name": loaded.name,
        "source": loaded.source,
        "device": str(loaded.device),
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "loadSeconds": round(loaded.load_s, 3),
    }
    return Loaded(Engine(loaded), info, loaded.device.type)


@dataclass(frozen=True)
class Selection:
    """The completion item selected in the client's popup (`selectedCompletionInfo`)."""

    start_line: int
    start_character: int
    end_line: int
    end_character: int
    text: str


@dataclass
class Suggestions:
    edits: list[LineEdit]
    timings: Timings | None = None


@dataclass
class Stats:
    requests: int = 0
    answered: int = 0
    cancelled: int = 0
    accepted: int = 0
    typed_through: int = 0  # requests answered from drafts the user was typing into
    latencies: deque[tuple[float, Timings, bool]] = field(default_factory=lambda: deque(maxlen=1000))

    def record(self, total_s: float, timings: Timings | None) -> None:
        """`timings` None: answered from the drafts already shown, without the model."""
        self.latencies.append((total_s, timings or Timings(), timings is not None))
        self.typed_through += timings is None

    def last(self) -> dict[str, Any] | None:
        """The newest fully computed request, phase by phase (for benchmarks and debugging)."""
        if not self.latencies:
            return None
        total, t, from_model = self.latencies[-1]
        return {
            "source": "model" if from_model else "typedThrough",
            "totalMs": round(1000 * total, 1),
            "prefillMs": round(1000 * t.prefill_s, 1),
            "modelMs": round(1000 * t.model_s, 1),
            "ngramMs": round(1000 * t.ngram_s, 1),
            "engineMs": round(1000 * t.total_s, 1),
            "steps": t.steps,
            "prefillTokens": t.prefill_tokens,
            "reusedTokens": t.reused_tokens,
        }

    def summary(self) -> dict[str, Any]:
        totals = [total for total, _, _ in self.latencies]
        phases = {
            "prefill": [t.prefill_s for _, t, _ in self.latencies],
            "model": [t.model_s for _, t, _ in self.latencies],
            "ngram": [t.ngram_s for _, t, _ in self.latencies],
        }
        return {
            "requests": self.requests,
            "answered": self.answered,
            "cancelled": self.cancelled,
            "accepted": self.accepted,
            "typedThrough": self.typed_through,
            "latencyMs": {name: _percentiles(values) for name, values in {"total": totals, **phases}.items()},
            "last": self.last(),
        }


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    ordered = sorted(values)

    def rank(q: float) -> float | None:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None

    return {"p50": rank(0.50), "p95": rank(0.95)}


def token_spans(tokenizer: Any) -> TokenSpans:
    return lambda text: tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]


class Session:
    def __init__(self, client: Client, loader: Loader = load_engine) -> None:
        self.client = client
        self.loader = loader
        self.settings = Settings()
        self.scheduler = Scheduler()
        self.workspace = Workspace(client)
        self.stats = Stats()
        self.roots: list[Path] = []
        self._loaded: Loaded | None = None
        self._loaded_key: tuple[Any, ...] | None = None
        self._error: str | None = None
        self._shown: dict[str, Shown] = {}  # per document, written by the worker only

    # -- configuration -------------------------------------------------------
    def configure(self, settings: Settings, warnings: Sequence[str] = (), roots: Sequence[Path] | None = None) -> Job:
        """Apply new settings without a restart: reload the model and stores only if needed."""
        for warning in warnings:
            self.client.show("warning", f"spd-lsp settings: {warning}")
        self.settings = settings
        self.scheduler.submit("forget all", lambda cancelled: self._shown.clear())  # drafts of old settings
        if roots is not None:
            self.roots = list(roots)
        return self.scheduler.submit(SETUP, lambda cancelled: self._setup(settings))

    def _setup(self, settings: Settings) -> None:
        if self._loaded is None or self._loaded_key != settings.model_key():
            self._load(settings)
        if self._loaded is None:
            return
        self.workspace.configure(self.roots, self._loaded.engine.tokenizer, settings.ngrams)
        self._loaded.engine.set_ngrams(self.workspace.ngrams())

    def _load(self, settings: Settings) -> None:
        self._loaded, self._loaded_key = None, settings.model_key()
        try:
            self._loaded = self.loader(settings)
            self._error = None
        except Exception as exc:  # noqa: BLE001 - any load failure leaves a working, empty server
            message = f"spd-lsp: the model could not be loaded, completions are off: {exc}"
            log.error(message)
            if message != self._error:
                self.client.show("error", message)
            self._error = message

    # -- completion ----------------------------------------------------------
    def complete(
        self, key: str, text: str, line: int, character: int, encoding: str, selection: Selection | None = None
    ) -> Job:
        """Drafts for a document snapshot; supersedes the previous request for `key`."""
        self.stats.requests += 1
        settings = self.settings
        return self.scheduler.submit(
            key, lambda cancelled: self._complete(key, settings, text, line, character, encoding, selection, cancelled)
        )

    def _complete(
        self,
        key: str,
        settings: Settings,
        text: str,
        line: int,
        character: int,
        encoding: str,
        selection: Selection | None,
        cancelled: CancelCheck,
    ) -> Suggestions:
        started = time.perf_counter()
        loaded = self._loaded
        cursor = locate(text, line, character, encoding)
        if loaded is None or cursor is None:
            return Suggestions([])
        end = cursor.offset
        if selection is not None:
            cursor, end = _apply_selection(cursor, line, selection, encoding)
        if not cursor.prefix.strip():
            return Suggestions([])
        shown = self._shown.get(key)
        timings = None
        drafts = shown.follow(cursor.prefix, cursor.line_suffix) if shown else []
        if not drafts:  # only a model call needs the prefix cut to its token budget
            budget = settings.prefix_budget(loaded.device_type)
            prefix = fit_prefix(cursor.prefix, token_spans(loaded.engine.tokenizer), budget)
            if not prefix.strip():
                return Suggestions([])
            result = loaded.engine.complete(prefix, settings.decode_options(), cancelled)
            fit = Fit(cursor, language_of(key), multiline=settings.multiline)
            drafts = finalize((d.text for d in result.drafts), fit, settings.k)
            timings = result.timings
            self._shown[key] = Shown.of(cursor.prefix, cursor.line_suffix, drafts)
        replaced = text[line_start(text, line) or 0 : end]
        self.stats.record(time.perf_counter() - started, timings)
        return Suggestions(line_edits(drafts, cursor, line, replaced, encoding), timings)

    def close_document(self, key: str) -> None:
        self.scheduler.cancel(key)
        self.scheduler.submit(("forget", key), lambda cancelled: self._shown.pop(key, None))

    # -- workspace, commands -------------------------------------------------
    def saved(self, path: Path) -> None:
        self.workspace.saved(path)

    def reindex(self) -> bool:
        return self.workspace.reindex()

    def accepted(self) -> None:
        self.stats.accepted += 1

    def status(self) -> dict[str, Any]:
        loaded = self._loaded
        return {
            "model": loaded.info if loaded else None,
            "error": self._error,
            "settings": {
                "k": self.settings.k,
                "maxTokens": self.settings.max_tokens,
                "decoding": self.settings.decoding,
            },
            "stores": self.workspace.status(),
            **self.stats.summary(),
        }

    def close(self) -> None:
        self.scheduler.close()
        self.workspace.close()


def _apply_selection(cursor: Cursor, line: int, selection: Selection, encoding: str) -> tuple[Cursor, int]:
    """The cursor after the popup's item, and the document offset the edit must reach."""
    start = offset_of(cursor.text, selection.start_line, selection.start_character, encoding)
    end = offset_of(cursor.text, selection.end_line, selection.end_character, encoding)
    if (
        start is None
        or end is None
        or selection.start_line != line
        or selection.end_line != line
        or start > cursor.offset
    ):
        return cursor, cursor.offset
    end = max(end, cursor.offset)
    return with_selection(cursor, start, end, selection.text), end
