"""The server's domain state: settings, the engine, the workspace stores, statistics.

Handlers in `server.py` call these methods with plain values (text, positions)
and convert what comes back to LSP types; nothing here knows about pygls. Every
model call runs on the scheduler's single worker thread.

Latency: a keystroke into the drafts shown is answered from them (type-through);
a keystroke that only extends the prefix being decoded lets that decode finish
(`extends`); the prompt window keeps its start across requests so the KV cache is
reused (`cursor.fit_window`), and a document keeps its last windows, so going back
to a region finds its cache (`ModelRunner` keeps several); while idle, the drafts
after the top draft are precomputed, so accepting it shows the next ones at once
(`_anticipate`), a newly opened document's window is prefilled with its context
(`warm_up`), and so is the newest request's place when its snippets change (`rewarm`).
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ngram_db.ignore import SECRET_PATTERNS
from spd_lsp.settings import NgramSettings, Settings
from spd_lsp.cursor import (
    EOL,
    MAX_CHARS_PER_TOKEN,
    Cursor,
    Encode,
    LineIndex,
    TokenSpans,
    Window,
    still_starts,
    eol_count,
    fit_window,
    locate,
    offset_of,
    with_selection,
)
from spd_lsp.api import CancelCheck, DecodeRequest, Loaded, Timings
from spd_lsp.fit.edits import Fit, LineEdit, Shown, finalize, line_edits
from spd_lsp.context.gather import ContextGatherer
from spd_lsp.worker import Job, KeyedWorker
from spd_lsp.fit.blocks import block_start
from spd_lsp.languages import comment_marker, language_of
from spd_lsp.session import report
from spd_lsp.session.compile_progress import watch_compile
from spd_lsp.session.exclusion import Exclusion, patterns_of
from spd_lsp.session.prefill_rate import PrefillRate
from spd_lsp.session.readiness import ERROR, LOADING, WARMING, ReadinessTracker
from spd_lsp.session.stores import Client, WorkspaceStores

log = logging.getLogger(__name__)
LOADING_TITLE = "spd-lsp: loading the model"
SETUP = "setup"  # scheduler key of model (re)loads and store changes: the newest wins
WARM_UP = "warm-up"  # scheduler key of the idle prefill of a window: the newest wins, any request drops it
RECENT_WINDOWS = 4  # per document: the windows whose prompt caches the model runner may still hold
# The model worker holds the GIL between torch calls; the event loop (and the stdin reader)
# must take a request in without waiting the default 5 ms per hand-over.
GIL_SWITCH_S = 0.001
# Speculative work (the next suggestion, warm-ups) waits this long after the last request:
# an editor's next request often follows an answer at once, and would wait for one forward.
BACKGROUND_DELAY_S = 0.05


Loader = Callable[[Settings], Loaded]  # the engine for the settings: injected by `commands/` (loading.py)


@dataclass(frozen=True)
class Selection:
    """The completion item selected in the client's popup (`selectedCompletionInfo`)."""

    start_line: int
    start_character: int
    end_line: int
    end_character: int
    text: str


@dataclass
class Request:
    """A completion request as the scheduler's keep rule sees it; `offset` is set once located."""

    line: int
    character: int
    text: str
    selected: bool
    offset: int | None = None


CONTEXT_CHARS = 64  # around the cursor: enough to tell typing from other edits


def extends(running: Any, new: Any) -> bool:
    """`new` only types more characters at `running`'s cursor, on the same line: the running
    decode's drafts may answer it by type-through, so it should finish. Looks at the text
    near the cursor only; a wrong guess costs one finished decode, never a wrong answer."""
    if not (isinstance(running, Request) and isinstance(new, Request)) or running.offset is None:
        return False
    if running.selected or new.selected or new.line != running.line:
        return False
    at, typed = running.offset, len(new.text) - len(running.text)
    before = slice(max(0, at - CONTEXT_CHARS), at)
    return (
        0 < typed == new.character - running.character
        and EOL.search(new.text[at : at + typed]) is None
        and new.text[before] == running.text[before]
        and new.text[at + typed : at + typed + CONTEXT_CHARS] == running.text[at : at + CONTEXT_CHARS]
    )


def accepts(anticipated: Any, new: Any) -> bool:
    """`new` is the document as the precomputation foresaw it: the top draft accepted."""
    return isinstance(anticipated, Request) and isinstance(new, Request) and new.text == anticipated.text


@dataclass
class Suggestions:
    edits: list[LineEdit]  # each carries its draft's rank when it was offered and the offer's id
    timings: Timings | None = None


class Stats:
    """Counters and recent latencies, written by the event loop and the model worker: one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()  # by exception class
        self._latencies: deque[tuple[float, Timings, bool]] = deque(maxlen=1000)
        self._prompt: dict[str, Any] | None = None  # format and token counts of the newest model prompt
        self._offered: Counter[int] = Counter()  # by rank (0: the top draft): fresh drafts answered
        self._shown: Counter[int] = Counter()  # by rank: drafts the client drew (`didShowCompletion`), once per offer
        self._accepted: Counter[int] = Counter()  # by rank, as the client's accept command reports it
        self._partly: Counter[int] = Counter()  # by rank: drafts partly accepted (a word, a line), once per offer
        self._seen: OrderedDict[tuple[str, int, int], None] = OrderedDict()  # (event, offer, rank) counted

    def count(self, name: str) -> None:
        """One more `requests`, `answered`, `cancelled` or `accepted`."""
        with self._lock:
            self._counts[name] += 1

    def offered(self, drafts: int) -> None:
        """An answer with `drafts` new drafts (ranks 0 .. drafts-1); typing through them offers none."""
        with self._lock:
            self._offered.update(range(drafts))

    def accepted(self, rank: int | None) -> None:
        """The client accepted a draft; `rank` None: one whose rank it did not say."""
        with self._lock:
            self._counts["accepted"] += 1
            if rank is not None:
                self._accepted[rank] += 1

    def shown(self, offer: int, rank: int) -> None:
        """The client drew the draft of `rank` in offer `offer`; a draft typed through or drawn again counts once."""
        with self._lock:
            if self._first("shown", offer, rank):
                self._shown[rank] += 1

    def partly_accepted(self, offer: int, rank: int) -> None:
        """The client accepted part of a draft (a word, a line); the rest of the same draft counts once."""
        with self._lock:
            if self._first("partly", offer, rank):
                self._partly[rank] += 1

    def _first(self, event: str, offer: int, rank: int) -> bool:
        key = (event, offer, rank)
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > SEEN_EVENTS:
            self._seen.popitem(last=False)
        return True

    def failed(self, kind: str) -> bool:
        """Count a failed request of `kind`; True the first time this kind fails."""
        with self._lock:
            self._failures[kind] += 1
            return self._failures[kind] == 1

    def record(self, total_s: float, timings: Timings | None) -> None:
        """`timings` None: answered from the drafts already shown, without the model."""
        with self._lock:
            self._latencies.append((total_s, timings or Timings(), timings is not None))
            self._counts["typedThrough"] += timings is None

    def prompted(self, info: dict[str, Any]) -> None:
        """What the newest model request's prompt held (format, snippets, token counts)."""
        with self._lock:
            self._prompt = info

    def last(self, *, decoded: bool = False) -> dict[str, Any] | None:
        """The newest answered request, phase by phase (for benchmarks and debugging);
        `decoded`: the newest the model answered (not typed through shown drafts)."""
        with self._lock:
            newest = next((entry for entry in reversed(self._latencies) if entry[2] or not decoded), None)
            prompt = self._prompt
        if newest is None:
            return None
        total, t, from_model = newest
        return {
            "source": "model" if from_model else "typedThrough",
            "totalMs": round(1000 * total, 1),
            "prefillMs": round(1000 * t.prefill_s, 1),
            "modelMs": round(1000 * t.model_s, 1),
            "ngramMs": round(1000 * t.ngram_s, 1),
            "verifyMs": round(1000 * t.verify_s, 1),
            "engineMs": round(1000 * t.total_s, 1),
            # a shared engine's (0 in process): waiting for its model thread, its whole time, the front end's wait
            "queueMs": round(1000 * t.queue_s, 1),
            "servedMs": round(1000 * t.served_s, 1),
            "roundTripMs": round(1000 * t.round_trip_s, 1),
            "steps": t.steps,
            "prefillTokens": t.prefill_tokens,
            "reusedTokens": t.reused_tokens,
            "prompt": prompt,
        }

    def summary(self) -> dict[str, Any]:
        with self._lock:
            latencies = list(self._latencies)
            counts, failures = dict(self._counts), dict(self._failures)
            offered, accepted = Counter(self._offered), Counter(self._accepted)
            shown, partly = Counter(self._shown), Counter(self._partly)
        ranks = range(max([*offered, *accepted, *shown, *partly], default=-1) + 1)
        phases = {
            "total": [total for total, _, _ in latencies],
            "prefill": [t.prefill_s for _, t, _ in latencies],
            "model": [t.model_s for _, t, _ in latencies],
            "ngram": [t.ngram_s for _, t, _ in latencies],
            "verify": [t.verify_s for _, t, _ in latencies],
        }
        return {
            **{name: counts.get(name, 0) for name in COUNTERS},
            "failed": sum(failures.values()),
            "failures": failures,
            "latencyMs": {name: _percentiles(values) for name, values in phases.items()},
            "drafts": {"offered": [offered[r] for r in ranks], "shown": [shown[r] for r in ranks],
                       "accepted": [accepted[r] for r in ranks], "partlyAccepted": [partly[r] for r in ranks]},
            "last": self.last(),
            "lastDecoded": self.last(decoded=True),
        }


COUNTERS = ("requests", "answered", "cancelled", "accepted", "typedThrough", "excluded")
SEEN_EVENTS = 4096  # (event, offer, rank) remembered to count each draft's shown and partly accepted once


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    ordered = sorted(values)

    def rank(q: float) -> float | None:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None

    return {"p50": rank(0.50), "p95": rank(0.95)}


def token_spans(tokenizer: Any) -> TokenSpans:
    return lambda text: tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]


def token_ids(tokenizer: Any) -> Encode:
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


class Session:
    def __init__(
        self, client: Client, loader: Loader, *, anticipate: bool = True,
        on_status: Callable[[dict[str, Any]], None] = lambda status: None,
    ) -> None:
        """`loader`: the engine for the settings (in process, or a shared one). `anticipate`: precompute the drafts
        after the top draft while idle (off: only on request). `on_status`: each change of the readiness
        (`readiness.py`: loading, warming up, ready, error), for the editor."""
        self.client = client
        self.anticipate = anticipate
        self.loader = loader
        self.settings = Settings()
        self.scheduler = KeyedWorker(background_delay_s=BACKGROUND_DELAY_S)
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        self.workspace = WorkspaceStores(client)
        self.stats = Stats()
        self.readiness = ReadinessTracker(on_status)
        self.exclusion = Exclusion()
        self._offers = itertools.count(1)  # each fresh set of drafts is an offer; typing through keeps its id
        self.roots: list[Path] = []
        self._loaded: Loaded | None = None
        self._loaded_key: tuple[Any, ...] | None = None
        self._error: str | None = None
        # Per document, written by the worker only: drafts shown, the prompt window, line starts.
        self._shown: dict[str, Shown] = {}
        self._windows: dict[str, list[Window]] = {}  # most recent first
        self._lines: dict[str, LineIndex] = {}
        self._ahead: dict[str, Shown] = {}  # drafts for the document with the top draft accepted
        self.context = ContextGatherer(on_change=self.rewarm)  # suffix, path and snippets of each prompt
        self._place: tuple[str, Cursor, Sequence[tuple[str, str]]] | None = None  # the newest request's
        self.prefill = PrefillRate()  # the engine's, from this session's requests: the CPU's prefix budget

    # -- configuration -------------------------------------------------------
    def configure(self, settings: Settings, warnings: Sequence[str] = (), roots: Sequence[Path] | None = None) -> Job:
        """Apply new settings without a restart: reload the model and stores only if needed."""
        for warning in warnings:
            self.client.show("warning", f"spd-lsp settings: {warning}")
        self.settings = settings
        self.scheduler.submit("forget all", lambda cancelled: self._forget())  # drafts of old settings
        if roots is not None:
            self.roots = list(roots)
        self.exclusion = Exclusion(settings.exclude, self.roots)
        self.context.configure(settings, self.roots)
        return self.scheduler.submit(SETUP, lambda cancelled: self._setup(settings))

    def _setup(self, settings: Settings) -> None:
        if self._loaded is None or self._loaded_key != settings.model_key():
            self._load(settings)
        if self._loaded is None:
            return
        if settings.prompt_format != "auto":
            from spd_lsp.engine.prompt.formats import resolve

            if (warning := resolve(self._loaded.engine.tokenizer, settings.prompt_format)[1]) is not None:
                self.client.show("warning", f"spd-lsp settings: {warning}")
        # Stores open on the index thread; the engine gets them when they are ready.
        self.workspace.configure(self.roots, self._loaded.engine.tokenizer, indexed(settings),
                                 on_ready=self._loaded.engine.set_ngrams)

    def _load(self, settings: Settings) -> None:
        if self._loaded is not None:
            self._loaded.engine.close()  # a shared engine's connection (spd_lsp/remote)
        self._loaded, self._loaded_key = None, settings.model_key()
        self.prefill.reset()
        self.readiness.set(LOADING, f"loading {settings.model or 'the bundled model'}")
        progress = self.client.progress(LOADING_TITLE)
        started = time.perf_counter()
        try:
            self._loaded = loaded = self.loader(settings)
            self._error = None
            model = report.model_info(loaded.info, loaded.engine)
            progress.end(f"loaded {model.get('name', 'the model')} on {model.get('device', '?')} "
                         f"in {time.perf_counter() - started:.1f} s")
            self.readiness.set(WARMING, "the first completion prefills the prompt",
                               {"name": model.get("name"), "device": model.get("device"),
                                "engineKind": model.get("engineKind")})
            watch_compile(self.client, loaded, current=lambda: self._loaded is loaded)  # progress, first start
        except Exception as exc:  # noqa: BLE001 - any load failure leaves a working, empty server
            message = f"spd-lsp: the model could not be loaded, completions are off: {exc}"
            log.error(message)
            progress.end("failed: the model could not be loaded")
            self.readiness.set(ERROR, message)
            if message != self._error:
                self.client.show("error", message)
            self._error = message

    # -- completion ----------------------------------------------------------
    def complete(
        self, key: str, text: str, line: int, character: int, encoding: str, selection: Selection | None = None,
        *, neighbours: Sequence[tuple[str, str]] = (),
    ) -> Job:
        """Drafts for a document snapshot; supersedes the previous request for `key`.

        `neighbours`: (uri, text) of the other open documents, for snippets.
        """
        self.stats.count("requests")
        if self.excluded(key):
            self.stats.count("excluded")
            return _answered(key, Suggestions([]))
        settings = self.settings
        neighbours = self.readable(neighbours)
        request = Request(line, character, text, selected=selection is not None)
        self.scheduler.cancel(("ahead", key), tag=request, keeps=accepts)  # any other edit drops it
        self.scheduler.cancel(WARM_UP)
        return self.scheduler.submit(
            key,
            lambda cancelled: self._complete(key, settings, request, encoding, selection, cancelled, neighbours),
            tag=request,
            keeps=extends,
        )

    def _complete(
        self,
        key: str,
        settings: Settings,
        request: Request,
        encoding: str,
        selection: Selection | None,
        cancelled: CancelCheck,
        neighbours: Sequence[tuple[str, str]] = (),
    ) -> Suggestions:
        started = time.perf_counter()
        loaded = self._loaded
        text, line = request.text, request.line
        lines = self._lines.setdefault(key, LineIndex())
        cursor = locate(text, line, request.character, encoding, lines)
        if loaded is None or cursor is None:
            return Suggestions([])
        request.offset = end = cursor.offset
        self.context.visit(key, line, text)
        line_start = cursor.line_start
        if selection is not None:
            cursor, end = _apply_selection(cursor, line, selection, encoding, lines)
        if not cursor.prefix.strip():
            return Suggestions([])
        shown = self._shown.get(key)
        timings = None
        ranked = shown.follow_ranked(cursor.prefix, cursor.line_suffix) if shown else []
        fresh = not ranked  # new drafts, not the shown ones typed through
        if not ranked and (ahead := self._ahead.pop(key, None)) and _foresaw(ahead, cursor):
            shown = self._shown[key] = ahead  # the user accepted the top draft: computed while idle
            ranked = list(enumerate(ahead.drafts))
        if not ranked:
            self._place = (key, cursor, neighbours)
            drafts, timings = self._decode(key, settings, loaded, cursor, cancelled, neighbours)
            shown = self._shown[key] = Shown.of(cursor.prefix, cursor.line_suffix, drafts, offer=next(self._offers))
            ranked = list(enumerate(drafts))
            if drafts and self.anticipate:
                self._anticipate(key, settings, cursor, drafts[0], neighbours)
        replaced = text[line_start:end]
        self.stats.record(time.perf_counter() - started, timings)
        assert shown is not None
        edits = line_edits([d for _, d in ranked], cursor, line, replaced, encoding, ranks=[r for r, _ in ranked],
                           offer=shown.offer)
        if fresh:
            self.stats.offered(len(edits))
        return Suggestions(edits, timings)

    def _decode(
        self, key: str, settings: Settings, loaded: Loaded, cursor: Cursor, cancelled: CancelCheck,
        neighbours: Sequence[tuple[str, str]] = (), *, background: bool = False,
    ) -> tuple[list[str], Timings | None]:
        """Drafts from the model, the prompt cut to its budget by the document's window. `background`: nobody
        waits for them yet (anticipation): a shared engine runs them only while no other request waits."""
        request = self._request(key, settings, loaded, cursor, neighbours)
        if request is None:
            return [], None
        if background:
            request = replace(request, background=True)
        result = loaded.engine.complete(request, cancelled)
        self.readiness.settled()
        self.prefill.record(result.timings.prefill_tokens, result.timings.prefill_s)
        if result.prompt:
            self.stats.prompted(result.prompt)
        fit = Fit(cursor, language_of(key), multiline=settings.multiline is True or starts_block(settings, cursor, key))
        drafts = finalize((d.text for d in result.drafts), fit, settings.k)
        return drafts, result.timings

    def _request(
        self, key: str, settings: Settings, loaded: Loaded, cursor: Cursor, neighbours: Sequence[tuple[str, str]]
    ) -> DecodeRequest | None:
        """What the engine gets for a request at `cursor`, its prompt in the document's window."""
        window = self._fit(key, settings, loaded, cursor.prefix)
        return decode_request(key, cursor, window, settings, loaded.engine.tokenizer, self.context, self.roots,
                              neighbours)

    def _fit(self, key: str, settings: Settings, loaded: Loaded, prefix: str) -> Window:
        """The window for `prefix`: one of the document's recent windows where it still fits."""
        tokenizer = loaded.engine.tokenizer
        budget = self.prefix_budget(settings, loaded)
        encode, spans = token_ids(tokenizer), token_spans(tokenizer)
        recent = self._windows.get(key, [])
        for previous in recent:  # the first that still starts the prompt; only those within reach are tokenized
            if 0 <= len(prefix) - previous.start <= budget * MAX_CHARS_PER_TOKEN and still_starts(prefix, previous):
                window = fit_window(prefix, encode, spans, budget, previous)
                if window.start == previous.start:
                    break
        else:
            window = fit_window(prefix, encode, spans, budget, recent[0] if recent else None)
        self._windows[key] = [window] + [w for w in recent if w.start != window.start][: RECENT_WINDOWS - 1]
        return window

    def prefix_budget(self, settings: Settings, loaded: Loaded) -> int:
        """The prompt's prefix budget now: by the model's device and the prefill rate measured so far."""
        return settings.prefix_budget(loaded.device_type, self.prefill.tokens_per_s())

    def warm_up(
        self, key: str, text: str, *, line: int | None = None, character: int = 0, encoding: str = "utf-16",
        neighbours: Sequence[tuple[str, str]] = (),
    ) -> Job:
        """While the model is idle, prefill the prompt a request at (`line`, `character`) would
        use (None: the document's opening window, what a request near its top uses), its context
        (snippets from `neighbours`, the other open documents, and the path) included, so that
        request finds its cache (llama.vim warms its cache so). Runs as background work: one at
        a time, and any request or edit drops it; the chunks already run stay in the cache.
        An excluded document is not warmed (its text is never read)."""
        settings = self.settings
        if self.excluded(key):
            return _answered(WARM_UP, None)
        neighbours = self.readable(neighbours)

        def place(loaded: Loaded) -> Cursor | None:
            if line is None:
                spans = token_spans(loaded.engine.tokenizer)
                return Cursor(text, len(opening(text, spans, self.prefix_budget(settings, loaded))))
            return locate(text, line, character, encoding, self._lines.setdefault(key, LineIndex()))

        return self._warm(settings, lambda loaded: (key, place(loaded), neighbours))

    def rewarm(self) -> Job:
        """While idle, prefill the prompt the newest request's place gets now: its snippet set may
        have changed since (the workspace index followed a changed file), and the next request
        there then prefills only what the user typed. An unchanged prompt costs one token's forward."""
        return self._warm(self.settings, lambda loaded: self._place)

    def _warm(
        self, settings: Settings, where: Callable[[Loaded], tuple[str, Cursor | None, Sequence[tuple[str, str]]] | None]
    ) -> Job:
        def work(cancelled: CancelCheck) -> None:
            loaded = self._loaded
            if loaded is None:
                return
            found = where(loaded)
            if found is None or found[1] is None:
                return
            key, cursor, neighbours = found
            if (request := self._request(key, settings, loaded, cursor, neighbours)) is not None:
                loaded.engine.warm(request, cancelled)
                self.readiness.settled()

        return self.scheduler.submit(WARM_UP, work, background=True)

    def edited(self) -> None:
        """A document changed: a warm-up for the text before the change is stale."""
        self.scheduler.cancel(WARM_UP)

    def _anticipate(
        self, key: str, settings: Settings, cursor: Cursor, draft: str, neighbours: Sequence[tuple[str, str]] = ()
    ) -> None:
        """While the model is idle, the drafts that follow `draft` once accepted (as llama.vim does)."""
        accepted = with_selection(cursor, cursor.offset, cursor.offset, draft)
        tag = Request(-1, -1, accepted.text, selected=False)

        def work(cancelled: CancelCheck) -> None:
            if self._loaded is not None:
                drafts, _ = self._decode(key, settings, self._loaded, accepted, cancelled, neighbours, background=True)
                self._ahead[key] = Shown.of(accepted.prefix, accepted.line_suffix, drafts, offer=next(self._offers))

        self._ahead.pop(key, None)
        self.scheduler.submit(("ahead", key), work, tag=tag, background=True)

    def close_document(self, key: str) -> None:
        self.scheduler.cancel(key)
        self.scheduler.submit(("forget", key), lambda cancelled: self._forget(key))

    def _forget(self, key: str | None = None) -> None:
        """Drop a document's (None: every document's) shown drafts, window and line index."""
        for per_document in (self._shown, self._windows, self._lines, self._ahead):
            if key is None:
                per_document.clear()
            else:
                per_document.pop(key, None)
        if self._place is not None and key in (None, self._place[0]):
            self._place = None
        self.context.forget(key)

    # -- workspace, commands -------------------------------------------------
    def saved(self, path: Path) -> None:
        self.workspace.saved(path)
        self.context.saved(path)

    def reindex(self) -> bool:
        return self.workspace.reindex()

    def accepted(self, rank: int | None = None) -> None:
        self.stats.accepted(rank)

    def shown(self, offer: int, rank: int) -> None:
        """The client drew a draft (`textDocument/didShowCompletion`)."""
        self.stats.shown(offer, rank)

    def partly_accepted(self, offer: int, rank: int) -> None:
        """The client accepted part of a draft (`textDocument/didPartiallyAcceptCompletion`)."""
        self.stats.partly_accepted(offer, rank)

    def excluded(self, key: str) -> bool:
        """The document is never completed nor read (`exclude`); said once per document in the log."""
        return self.exclusion.excludes(key)

    def readable(self, neighbours: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The other open documents whose text may go into a prompt: not the excluded ones."""
        return [(uri, text) for uri, text in neighbours if self.exclusion.pattern_for(uri) is None]

    def failed(self, error: BaseException) -> None:
        """A completion failed (answered empty): counted by kind, the first of each kind shown."""
        kind = type(error).__name__
        if self.stats.failed(kind):
            self.client.show(
                "error",
                f"spd-lsp: a completion failed ({kind}: {error}); such requests answer nothing. "
                "The log has the details; `spd.status` counts further failures.",
            )

    def status(self) -> dict[str, Any]:
        """What the server does, for `spd.status`: the fields, and `summary`, the same as readable lines."""
        loaded = self._loaded
        status = {
            "state": self.readiness.current.to_dict(),
            "model": report.model_info(loaded.info, loaded.engine) if loaded else None,
            "error": self._error,
            "engine": report.engine_link(self.settings.engine, loaded.engine if loaded else None),
            "settings": {
                "k": self.settings.k,
                "maxTokens": self.settings.max_tokens,
                "decoding": self.settings.decoding,
            },
            "context": {"promptFormat": self.settings.prompt_format, **self.settings.context.status(),
                        **self.context.status(),
                        "prefixBudget": self.prefix_budget(self.settings, loaded) if loaded else None,
                        "prefillTokensPerSecond": _rounded(self.prefill.tokens_per_s())},
            "stores": self.workspace.status(),
            **self.stats.summary(),
        }
        return {**status, "summary": report.summary(status)}

    def close(self) -> None:
        self.scheduler.close()
        self.workspace.close()
        self.context.close()


def decode_request(
    key: str, cursor: Cursor, window: Window, settings: Settings, tokenizer: Any, gatherer: ContextGatherer,
    roots: Sequence[Path], neighbours: Sequence[tuple[str, str]] = (),
) -> DecodeRequest | None:
    """The request for `cursor` in document `key`: the prefix in its `window` (and its tokens), the context
    (suffix, path, snippets, language), the format and options; None when the window holds only blanks.
    The session builds every request here, and so does `spd-lsp complete`."""
    prefix = cursor.prefix[window.start :]
    if not prefix.strip():
        return None
    context = gatherer.gather(
        key, cursor, eol_count(cursor.text, cursor.offset), settings, spans=token_spans(tokenizer),
        count_tokens=lambda text: len(token_ids(tokenizer)(text)), roots=roots, neighbours=neighbours,
    )
    options = settings.decode_options(block=starts_block(settings, cursor, key))
    return DecodeRequest(prefix, options, window.ids, context, settings.prompt_format)


def starts_block(settings: Settings, cursor: Cursor, key: str) -> bool:
    """`multiline` "auto" lets this request's drafts span lines: the cursor starts an empty block
    (`spd_lsp.fit.blocks`) of document `key`."""
    language = language_of(key)
    return settings.multiline == "auto" and block_start(cursor, language, comment_marker(language)) is not None


def indexed(settings: Settings) -> NgramSettings:
    """The store's settings: `ngrams.exclude` and the content exclusion's own patterns (an excluded file is not read;
    the secret-file names the indexer leaves out anyway)."""
    extra = tuple(p for p in patterns_of(settings.exclude) if p not in settings.ngrams.exclude + SECRET_PATTERNS)
    return replace(settings.ngrams, exclude=settings.ngrams.exclude + extra)


def _rounded(value: float | None) -> int | None:
    return None if value is None else round(value)


def _answered(key: str, value: Any) -> Job:
    """A job that needs no worker: its answer is known (an excluded document)."""
    job = Job(key, lambda cancelled: value)
    job.future.set_result(value)
    return job


def opening(text: str, spans: TokenSpans, budget: int) -> str:
    """The document's first lines within `budget` tokens: the prompt of a request near its top."""
    head = text[: budget * MAX_CHARS_PER_TOKEN]
    offsets = spans(head)
    if len(offsets) <= budget and len(head) == len(text):
        return text
    end = offsets[min(budget, len(offsets)) - 1][1]
    return head[: head.rfind("\n", 0, end) + 1]


def _foresaw(ahead: Shown, cursor: Cursor) -> bool:
    prefix = cursor.prefix
    return (ahead.prefix_length, ahead.suffix) == (len(prefix), cursor.line_suffix) and ahead.prefix_hash == hash(prefix)


def _apply_selection(
    cursor: Cursor, line: int, selection: Selection, encoding: str, lines: LineIndex
) -> tuple[Cursor, int]:
    """The cursor after the popup's item, and the document offset the edit must reach."""
    start = offset_of(cursor.text, selection.start_line, selection.start_character, encoding, lines)
    end = offset_of(cursor.text, selection.end_line, selection.end_character, encoding, lines)
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
