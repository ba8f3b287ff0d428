"""Latency work that must not change answers: chunked, cancellable prefill; the cache after failures."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from spd_lsp import cursor as context
from spd_lsp.engine import model
from spd_lsp.engine.decoding import lm, threads
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.api import Cancelled, DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from spd_lsp.worker import KeyedWorker
from spd_lsp.session.session import Request, extends
from tests.session.test_server_session import FakeEngine, make_session
from tests.tiny_models import tiny_model

PROMPT = list(range(5, 205))  # 200 tokens: several chunks of 64
OPTIONS = DecodeOptions(k=3, max_tokens=6, alpha=0.0)


@pytest.fixture(scope="module")
def loaded() -> Any:
    return tiny_model("llama")


def fresh_logits(loaded: Any, ids: list[int]) -> torch.Tensor:
    return ModelRunner(loaded.model, loaded.device, chunk_tokens=10_000).prefill(ids)[0]


def test_chunked_prefill_equals_one_forward(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device, chunk_tokens=64)
    logits, reused = runner.prefill(PROMPT)
    assert reused == 0
    assert runner.cached_ids == PROMPT and runner.cache.get_seq_length() == len(PROMPT)
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_cancel_between_chunks_stops_and_keeps_the_chunks_run(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device, chunk_tokens=64)
    checks = []

    def cancelled() -> bool:
        checks.append(runner.cache.get_seq_length())
        return len(checks) > 2  # two chunks run, then the keystroke arrives

    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, cancelled)
    assert checks == [0, 64, 128]
    assert runner.cached_ids == PROMPT[:128] and runner.cache.get_seq_length() == 128
    logits, reused = runner.prefill(PROMPT)  # the next request feeds only the rest
    assert reused == 128
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_next_request_after_a_cancelled_prefill_equals_an_uncancelled_run(loaded: Any) -> None:
    prefix = "def add(a, b):\n    return a + b\n" * 12 + "for name in "
    engine = LocalEngine(loaded)
    engine.runner.chunk_tokens, engine.runner.chunk_seconds = 16, None  # chunks of 16, cancelled between them
    calls = iter(range(1000))
    with pytest.raises(Cancelled):
        engine.complete(DecodeRequest(prefix, OPTIONS), lambda: next(calls) >= 3)
    assert 0 < len(engine.runner.cached_ids) < len(engine.encode(prefix))
    after_cancel = engine.complete(DecodeRequest(prefix, OPTIONS))
    assert after_cancel.timings.reused_tokens == 48
    reference = LocalEngine(loaded).complete(DecodeRequest(prefix, OPTIONS))
    assert [d.text for d in after_cancel.drafts] == [d.text for d in reference.drafts]


def test_a_failed_forward_leaves_no_belief_in_a_cache_it_lacks(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10, item 10: `cached_ids` was recorded before the forward ran."""
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(PROMPT[:50])

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    with monkeypatch.context() as patch:  # the second layer fails after the first has cached its keys
        patch.setattr(loaded.model.model.layers[1], "forward", out_of_memory)
        with pytest.raises(RuntimeError):
            runner.prefill(PROMPT)
    assert len(runner.cached_ids) <= (runner.cache.get_seq_length() if runner.cache is not None else 0)
    logits, _ = runner.prefill(PROMPT)
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


OTHER = list(range(250, 50, -1))  # another region or document


def test_going_back_to_where_the_user_was_reuses_its_cache(loaded: Any) -> None:
    """Issue 12 (latency2): a request elsewhere overwrote the one cache, so jumping back was cold again."""
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(PROMPT)
    assert runner.prefill(OTHER)[1] == 0
    logits, reused = runner.prefill(PROMPT + [7, 8])
    assert reused == len(PROMPT)
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT + [7, 8]), rtol=1e-4, atol=1e-4)
    assert runner.prefill(OTHER[:150] + [9])[1] == 150  # the other one was kept too
    assert runner.cached_ids == OTHER[:150] + [9] and runner.cache.get_seq_length() == 151


def test_a_jump_up_copies_the_shared_part_and_keeps_the_longer_cache(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(PROMPT)
    logits, reused = runner.prefill(PROMPT[:100] + [3])  # earlier in the same window
    assert reused == 100
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT[:100] + [3]), rtol=1e-4, atol=1e-4)
    assert runner.prefill(PROMPT)[1] == len(PROMPT) - 1  # back down: still whole
    assert runner.prefill(PROMPT[:-3] + [4])[1] == len(PROMPT) - 3  # a few tokens dropped: continued in place
    assert len(runner.parked) == 1


def test_the_least_recently_used_cache_goes_first(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device, slots=2)
    third = list(range(300, 200, -1))
    for prompt in (PROMPT, OTHER, PROMPT, third):
        runner.prefill(prompt)
    assert [ids for _, ids in runner.parked] == [PROMPT] and runner.cached_ids == third
    assert runner.prefill(OTHER)[1] == 0
    single = ModelRunner(loaded.model, loaded.device, slots=1)
    single.prefill(PROMPT)
    single.prefill(OTHER)
    assert single.parked == [] and single.prefill(PROMPT)[1] == 0


def test_cuda_timings_wait_for_the_device(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12.7: without a sync, a clock read after a CUDA forward measures kernel launches."""
    synced: list[Any] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    lm.device_sync(torch.device("cuda", 0))
    lm.device_sync(torch.device("cpu"))
    assert synced == [torch.device("cuda", 0)]
    monkeypatch.setattr(lm, "device_sync", synced.append)
    ModelRunner(loaded.model, loaded.device).prefill(PROMPT[:8])
    assert synced[1:] == [loaded.device]


@pytest.mark.parametrize(
    "flags, quantize, expected",
    [
        ({"fpu", "avx512f", "avx512_bf16"}, None, torch.bfloat16),
        ({"fpu", "amx_bf16"}, None, torch.bfloat16),
        ({"fp", "asimd", "bf16"}, None, torch.bfloat16),  # Arm
        ({"fpu", "avx2", "avx512f"}, None, torch.float32),
        ({"fpu", "avx512_bf16"}, "int8", torch.float32),  # int8 keeps its float parts in fp32
    ],
)
def test_cpu_dtype_is_bf16_where_the_cpu_has_it(
    flags: set[str], quantize: str | None, expected: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model, "cpu_flags", lambda: frozenset(flags))
    assert model.pick_dtype(torch.device("cpu"), quantize=quantize) is expected
    assert model.pick_dtype(torch.device("cpu"), "float32") is torch.float32  # the setting still forces either
    assert model.pick_dtype(torch.device("cpu"), "bfloat16") is torch.bfloat16


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Any) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512_bf16\nvmx flags\t: ept\n\nFeatures\t: bf16 asimd\n")
    assert model.cpu_flags(cpuinfo) == {"fpu", "avx512_bf16", "bf16", "asimd"}
    assert model.cpu_flags(tmp_path / "missing") == frozenset()


# -- no per-request work proportional to the document ---------------------------------------


def reference_line_start(text: str, line: int) -> int | None:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    return starts[line] if line < len(starts) else None


@given(
    st.lists(st.sampled_from(["a", "b ", "\n", "\r\n", "\r", "é"]), max_size=60),
    st.lists(st.tuples(st.integers(0, 70), st.sampled_from(["", "x", "\n", "\r", "\r\n", "DEL"]), st.integers(0, 30))),
)
def test_line_index_agrees_with_a_full_scan_across_edits(pieces: list[str], edits: list[tuple[int, str, int]]) -> None:
    text, lines = "".join(pieces), context.LineIndex()
    for at, insert, line in edits:
        at = min(at, len(text))
        text = text[:at] + text[at + 1 :] if insert == "DEL" else text[:at] + insert + text[at:]
        assert lines.start(text, line) == reference_line_start(text, line)


def test_typing_near_the_cursor_scans_only_near_the_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12.5: every request scanned the document from its start for the cursor's line."""
    text = "x = 1\n" * 100_000 + "value = "
    lines = context.LineIndex()
    assert lines.start(text, 100_000) == 600_000
    scanned: list[tuple[int, int]] = []
    skip = context.skip_lines
    def recording(t: str, offset: int, count: int) -> int | None:
        scanned.append((offset, count))
        return skip(t, offset, count)

    monkeypatch.setattr(context, "skip_lines", recording)
    for typed in ("v", "va", "val"):  # new versions of the document, same line
        cursor = context.locate(text + typed, 100_000, 8 + len(typed), "utf-16", lines)
        assert cursor is not None and cursor.line_prefix == "value = " + typed
    assert scanned == [(600_000, 0)] * 3
    assert context.locate("y\n" + text, 100_001, 0, "utf-16", lines).offset == 600_002  # an edit above: rescanned


# -- a window that keeps the cache ----------------------------------------------------------


def word_ids(text: str) -> list[int]:
    return [len(m.group()) for m in re.finditer(r"\w+|\W", text)]


def word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\w+|\W", text)]


def test_typing_moves_the_window_start_in_quarter_budget_jumps() -> None:
    """Issue 12.3: a left cut recomputed per request moved on nearly every keystroke, invalidating the cache."""
    source = "".join(f"    total_{i} = compute(value_{i}, {i})\n" for i in range(200))
    budget, window, moves, requests = 256, None, 0, 0
    for end in range(200, len(source), 3):  # a request every third character typed
        prefix = source[:end]
        new = context.fit_window(prefix, word_ids, word_spans, budget, window)
        assert new.ids == word_ids(prefix[new.start :]) and len(new.ids) <= budget
        assert context.is_line_start(prefix, new.start)
        moves += window is not None and new.start != window.start
        window, requests = new, requests + 1
    typed_tokens = len(word_ids(source[200:]))
    assert moves <= typed_tokens / (budget // 4) + 1
    assert requests > 10 * moves  # almost every request keeps the cached prompt


def test_typing_on_a_line_longer_than_the_budget_keeps_the_window_start() -> None:
    """Issue 46: once the cursor's line alone was over the budget, the window's cut fell inside the line, which no
    later request accepted as a start (not a line start): every keystroke got a new window, a whole cold prefill
    (the typing storm of bench_windows types 12,000 characters on one line; its answer after the storm: 3.5 s)."""
    head = "".join(f"x_{i} = {i}\n" for i in range(40))
    line = "".join(f"value_{i} + " for i in range(400))  # one line, ~1,600 word tokens
    budget, window, moves, requests = 256, None, 0, 0
    for end in range(len(head) + 200, len(head) + len(line), 3):
        prefix = (head + line)[:end]
        new = context.fit_window(prefix, word_ids, word_spans, budget, window)
        assert new.ids == word_ids(prefix[new.start :]) and len(new.ids) <= budget
        moves += window is not None and new.start != window.start
        window, requests = new, requests + 1
    assert window is not None and not context.is_line_start(prefix, window.start)  # the cut is inside the line
    assert moves <= len(word_ids(line)) / (budget // 4) + 1
    assert requests > 10 * moves


def test_a_window_cut_inside_a_line_is_not_kept_where_its_line_changed_before_it() -> None:
    line = "".join(f"value_{i} + " for i in range(400))
    window = context.fit_window(line, word_ids, word_spans, 64)
    assert not context.is_line_start(line, window.start)
    assert context.still_starts(line + "more", window)
    assert not context.still_starts("y" + line, window)  # everything after the edit moved by one character


def test_a_fresh_window_fills_the_budget_like_fit_prefix() -> None:
    prefix = "".join(f"line_{i} = {i}\n" for i in range(100)) + "x = "
    window = context.fit_window(prefix, word_ids, word_spans, 50)
    assert prefix[window.start :] == context.fit_prefix(prefix, word_spans, 50)


def test_a_window_from_another_text_is_not_reused() -> None:
    first = context.fit_window("a = 1\n" * 40 + "b", word_ids, word_spans, 32)
    other = "zz = 9\n" * 40 + "c"
    window = context.fit_window(other, word_ids, word_spans, 32, first)
    assert window.ids == word_ids(other[window.start :]) and other[window.start :].startswith("zz")


def test_a_window_fitted_to_a_smaller_budget_keeps_its_start_until_it_must_move() -> None:
    """The CPU's budget grows from 512 to 1,024 once the prefill rate is measured fast: a document's window (and its
    cache) of the smaller budget is not refitted at once, only when it outgrows the larger budget."""
    prefix = "".join(f"line_{i} = {i}\n" for i in range(400))
    small = context.fit_window(prefix, word_ids, word_spans, 64)
    assert small.budget == 64 and len(small.ids) <= 64
    typed = prefix + "m"
    kept = context.fit_window(typed, word_ids, word_spans, 128, small)
    assert len(kept.ids) < 128 // 2  # under the new budget's floor: a window of 128 would have moved
    assert kept.start == small.start and kept.budget == 64 and kept.ids == word_ids(typed[kept.start :])
    outgrown = typed + "more = 1\n" * 40
    moved = context.fit_window(outgrown, word_ids, word_spans, 128, kept)
    assert moved.start > kept.start and moved.budget == 128 and 64 < len(moved.ids) <= 128


class TimedPrefillEngine(FakeEngine):
    """Reports each request's prefill (its window's tokens) as taking the time of `tokens_per_s`."""

    def __init__(self, tokens_per_s: float) -> None:
        super().__init__(["alpha"], steps=1, step_s=0.0)
        self.tokens_per_s = tokens_per_s
        self.windows: list[int] = []

    def complete(self, request: DecodeRequest, cancelled: Any = None) -> Any:
        result = super().complete(request, cancelled)
        self.windows.append(len(request.ids or []))
        result.timings.prefill_tokens = len(request.ids or [])
        result.timings.prefill_s = result.timings.prefill_tokens / self.tokens_per_s
        return result


@pytest.mark.parametrize("tokens_per_s, later", [(600.0, 512), (4000.0, 1024)])
def test_the_cpu_prefix_budget_follows_the_prefill_rate_the_session_measured(tokens_per_s: float, later: int) -> None:
    """Issue 45: on a CPU whose prefill runs ~600 tokens/s (a Xeon without AMX), every cold request prefilled a 1,024-
    token window: 1.9 s, against the 1 s the budget's rule allows. The first request of a session (no rate measured)
    gets 512 tokens; later windows 1,024 only where the measured rate prefills them within the rule's bound."""
    engine = TimedPrefillEngine(tokens_per_s)
    session, _ = make_session(engine)
    try:
        document = "".join(f"v{i} = {i}\n" for i in range(600))  # ~3,600 tokens of FakeTokenizer's
        ask(session, "first", document).future.result(10)
        ask(session, "second", document).future.result(10)
        status = session.status()["context"]
    finally:
        session.close()
    assert 384 <= engine.windows[0] <= 512 and later * 3 // 4 <= engine.windows[1] <= later
    assert status["prefixBudget"] == later and status["prefillTokensPerSecond"] == round(tokens_per_s)


# -- a fast typist still gets drafts ---------------------------------------------------------

LINE = "first line\nvalue = "


@pytest.fixture
def slow_session() -> Any:
    engine = FakeEngine(["alpha()", "beta", "gamma"], steps=10, step_s=0.03)
    session, _ = make_session(engine)
    yield session, engine
    session.close()


def wait_for_decode(engine: FakeEngine) -> None:
    while not engine.prefixes:
        time.sleep(0.005)


def test_typing_on_into_the_prefix_being_decoded_lets_the_decode_finish(slow_session: Any) -> None:
    """Issue 12.6: each keystroke cancelled the decode in flight, so a fast typist never got drafts."""
    session, engine = slow_session
    first = session.complete("doc", LINE, 1, 8, "utf-16")
    wait_for_decode(engine)
    typed = [session.complete("doc", LINE + "alp"[:n], 1, 8 + n, "utf-16") for n in (1, 2, 3)]
    first.cancel()  # the editor gave up on the first request: the newer ones still need its decode
    answer = typed[-1].future.result(5)
    assert [e.draft for e in answer.edits] == ["ha()"] and answer.timings is None  # by type-through
    assert engine.finished == 1 and len(engine.prefixes) == 1
    for superseded in typed[:-1]:
        assert superseded.future.cancelled()


def test_an_edit_that_contradicts_the_decode_still_cancels_it(slow_session: Any) -> None:
    session, engine = slow_session
    first = session.complete("doc", LINE + "xy", 1, 10, "utf-16")
    wait_for_decode(engine)
    deleted = session.complete("doc", LINE + "x", 1, 9, "utf-16")  # backspace
    with pytest.raises(Cancelled):
        first.future.result(5)
    assert deleted.future.result(5).timings is not None and engine.finished == 1


@pytest.mark.parametrize(
    "running, new, expected",
    [
        (Request(1, 8, LINE, selected=False, offset=19), Request(1, 9, LINE + "a", selected=False), True),
        (Request(1, 8, LINE, selected=False, offset=19), Request(1, 8, LINE, selected=False), False),  # nothing typed
        (Request(1, 8, LINE, selected=False, offset=19), Request(2, 0, LINE + "\n", selected=False), False),
        (Request(1, 8, LINE, selected=False, offset=19), Request(1, 9, "X" + LINE, selected=False), False),
        (Request(1, 8, LINE, selected=False), Request(1, 9, LINE + "a", selected=False), False),  # not located yet
        (Request(1, 8, LINE, selected=True, offset=19), Request(1, 9, LINE + "a", selected=False), False),
    ],
)
def test_which_requests_extend_the_running_one(running: Request, new: Request, expected: bool) -> None:
    assert extends(running, new) is expected


# -- the next suggestion, precomputed ---------------------------------------------------------


@pytest.fixture
def anticipating() -> Any:
    engine = FakeEngine(["alpha()", "beta", "gamma"], steps=3, step_s=0.01)
    session, _ = make_session(engine, anticipate=True)
    yield session, engine
    session.close()


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_accepting_the_top_draft_is_answered_from_the_idle_precomputation(anticipating: Any) -> None:
    """Issue 12.4: accept -> next ghost text waited for a full decode."""
    session, engine = anticipating
    shown = session.complete("doc", LINE, 1, 8, "utf-16").future.result(5)
    assert shown.edits[0].draft == "alpha()"
    wait_until(lambda: engine.finished == 2)  # the idle worker decoded the accepted state
    assert engine.prefixes == [LINE, LINE + "alpha()"]
    accepted = session.complete("doc", LINE + "alpha()", 1, 15, "utf-16").future.result(5)
    assert accepted.timings is None and [e.draft for e in accepted.edits] == ["alpha()", "beta", "gamma"]
    assert accepted.edits[0].new_text == "value = alpha()alpha()"


def test_any_other_edit_drops_the_precomputation(anticipating: Any) -> None:
    session, engine = anticipating
    engine.step_s = 0.2
    first = session.complete("doc", LINE, 1, 8, "utf-16")
    wait_until(lambda: len(engine.prefixes) == 2)  # the precomputation runs
    other = session.complete("doc", LINE + "z", 1, 9, "utf-16")
    assert first.future.result(5).edits and other.future.result(5).timings is not None
    assert engine.prefixes[:3] == [LINE, LINE + "alpha()", LINE + "z"] and engine.finished == 2  # it was stopped


def test_a_request_for_another_document_stops_the_precomputation() -> None:
    scheduler = KeyedWorker()
    try:
        started = threading.Event()

        def idle_work(cancelled: Any) -> None:
            started.set()
            while not cancelled():
                time.sleep(0.005)
            raise Cancelled()

        background = scheduler.submit(("ahead", "a.py"), idle_work, background=True)
        started.wait(5)
        assert scheduler.submit("b.py", lambda cancelled: "drafts").future.result(5) == "drafts"
        with pytest.raises(Cancelled):
            background.future.result(5)
    finally:
        scheduler.close()


# -- fewer cold requests: windows kept per document, prefilled while idle ----------------------

DOCUMENT = "".join(f"def add_{i}(a, b):\n    return a + b * {i}\n" for i in range(120)) + "for name in "


@pytest.fixture
def tiny_session(loaded: Any) -> Any:
    engine = LocalEngine(loaded)
    session, _ = make_session(engine)
    yield session, engine
    session.close()


def ask(session: Any, key: str, text: str) -> Any:
    line = text.count("\n")
    return session.complete(key, text, line, len(text) - text.rfind("\n") - 1, "utf-16")


def drafts_of(answer: Any) -> list[str]:
    return [edit.draft for edit in answer.edits]


def test_jumping_back_to_where_the_user_typed_is_not_cold(tiny_session: Any) -> None:
    """Issue 12 (latency2): a request elsewhere in the document moved its only window and cache."""
    session, _ = tiny_session
    here = ask(session, "doc", DOCUMENT).future.result(30)
    away = ask(session, "doc", DOCUMENT[: DOCUMENT.index("def add_20")] + "x = ").future.result(30)
    back = ask(session, "doc", DOCUMENT + "n").future.result(30)
    assert here.timings.prefill_tokens > 300 and away.timings.prefill_tokens > 100
    assert back.timings.prefill_tokens <= 3


def test_an_opened_document_is_prefilled_while_idle(tiny_session: Any) -> None:
    session, engine = tiny_session
    short = DOCUMENT[-400:]
    session.warm_up("doc", short).future.result(30)
    assert len(engine.runner.cached_ids) > 50
    assert ask(session, "doc", short).future.result(30).timings.prefill_tokens <= 2
    top = DOCUMENT[: DOCUMENT.index("def add_9(")]  # a long document, opened: its first lines
    session.warm_up("long.py", DOCUMENT).future.result(30)
    assert ask(session, "long.py", top + "x = ").future.result(30).timings.prefill_tokens <= 4


def test_the_window_at_a_cursor_is_prefilled_while_idle(tiny_session: Any) -> None:
    session, _ = tiny_session
    line = DOCUMENT.count("\n")
    session.warm_up("doc", DOCUMENT, line=line, character=len("for name in ")).future.result(30)
    assert ask(session, "doc", DOCUMENT + "x").future.result(30).timings.prefill_tokens <= 3


def test_a_request_drops_the_warm_up_and_the_cache_stays_consistent(
    tiny_session: Any, loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, engine = tiny_session
    engine.runner.chunk_tokens, engine.runner.chunk_seconds = 16, None  # chunks of 16, cancelled between them
    chunks = threading.Semaphore(0)
    forward = engine.runner.forward

    def slow(*args: Any, **kwargs: Any) -> Any:
        chunks.release()
        time.sleep(0.02)
        return forward(*args, **kwargs)

    monkeypatch.setattr(engine.runner, "forward", slow)
    opened = DOCUMENT[-600:]
    warming = session.warm_up("opened.py", opened)
    for _ in range(3):
        assert chunks.acquire(timeout=30)  # three chunks run, then the user asks elsewhere
    other = ask(session, "other.py", DOCUMENT[:500]).future.result(30)
    with pytest.raises(Cancelled):
        warming.future.result(30)
    back = ask(session, "opened.py", opened).future.result(30)
    assert 3 * 16 <= back.timings.reused_tokens < len(engine.runner.cached_ids)  # it kept the chunks it ran

    reference, _ = make_session(LocalEngine(loaded))
    try:
        assert drafts_of(other) == drafts_of(ask(reference, "other.py", DOCUMENT[:500]).future.result(30))
        assert drafts_of(back) == drafts_of(ask(reference, "opened.py", opened).future.result(30))
    finally:
        reference.close()


def test_speculative_work_waits_for_a_quiet_moment() -> None:
    """Issue 12 (latency2): the precomputation started the moment an answer went out, so the
    next request (cold documents in bench_server) waited for its first forward."""
    for delay, runs_first in ((0.0, True), (600.0, False)):
        scheduler = KeyedWorker(background_delay_s=delay)
        try:
            ran: list[str] = []
            scheduler.submit("a.py", lambda cancelled: ran.append("answer")).future.result(5)
            background = scheduler.submit(("ahead", "a.py"), lambda cancelled: ran.append("ahead"), background=True)
            if runs_first:
                background.future.result(5)
            scheduler.submit("b.py", lambda cancelled: ran.append("next")).future.result(5)
            assert ran == (["answer", "ahead", "next"] if runs_first else ["answer", "next"])
        finally:
            scheduler.close()


def test_an_oversubscribed_cpu_runs_one_thread(tmp_path: Any) -> None:
    """Issue 12 (latency2): at load ~20 on 2 cores, 2 torch threads made a prefill ~38x slower than 1."""
    pressure = tmp_path / "cpu"
    pressure.write_text("some avg10=99.86 avg60=99.88 avg300=99.80 total=8676683195\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert threads.cpu_pressure(pressure) == 99.86
    assert threads.intra_op_threads(2, threads.cpu_pressure(pressure)) == 1
    pressure.write_text("some avg10=3.10 avg60=1.00 avg300=0.50 total=1\n")
    assert threads.intra_op_threads(2, threads.cpu_pressure(pressure)) == 2
    assert threads.cpu_pressure(tmp_path / "missing") is None and threads.intra_op_threads(2, None) == 2


def test_a_model_loads_with_one_thread_on_an_oversubscribed_cpu_and_gives_torch_its_own_number_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The load's copies (the fast path's fused projections) stalled on 2 threads at load ~4 (0.6-1.8 s against
    0.1-0.2 s on one); the runner built after it must still find torch's default as its own."""
    default = torch.get_num_threads()
    inside: list[int] = []
    for pressure, wanted in ((99.0, 1), (1.0, default)):
        monkeypatch.setattr(model, "cpu_pressure", lambda pressure=pressure: pressure)
        with model.load_threads(torch.device("cpu")):
            inside.append(torch.get_num_threads())
        assert torch.get_num_threads() == default
        assert inside[-1] == wanted
    with pytest.raises(RuntimeError), model.load_threads(torch.device("cpu")):
        raise RuntimeError("a failed load")
    assert torch.get_num_threads() == default


def test_the_runner_sets_threads_from_the_cpu_pressure(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = ModelRunner(loaded.model, loaded.device)
    chosen: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", chosen.append)
    monkeypatch.setattr(lm, "cpu_pressure", lambda: 99.0)
    runner.prefill(PROMPT[:8])
    monkeypatch.setattr(lm, "cpu_pressure", lambda: 1.0)
    runner.prefill(PROMPT[:9])
    assert chosen == [1, runner.threads]

