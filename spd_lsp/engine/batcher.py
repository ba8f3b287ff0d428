"""Continuous batching: concurrent requests decode together, each its rows of one batch.

A superposed request takes ONE row; beam takes k rows per request (so does a benchmark's batched
nucleus, bench/baselines.py), greedy one. A request joins between steps: its prompt is
prefilled on the runner of its affinity key (so an editor's next request reuses its
prompt cache), a chunk at a time between steps (about one chunk of tokens per step
for all joiners, fewest to go first: a cold prompt does not stall the batch), then its
key/value rows are copied into the batch's cache (`slots.BatchCache`: preallocated rows,
holes masked), with its own position ids. Every step runs `stepping.decode_step` over all requests (ONE
forward); a finished or cancelled request leaves between steps; superposed requests
that leave in the same step are verified together, ONE forward a round on their own
prompts' key/values (`verify_together`). A request joining or leaving copies its own
rows only; the batch is re-gathered only when a request forks or reorders its rows
(beam); steps write their column in place.

Every request's prompt is built here as `LocalEngine.complete` builds it (its context laid out
by its prompt format), so an editor's request, suffix, path and snippets included, joins the
batch. Requests the batch cannot take run alone through `LocalEngine.complete` between steps:
methods the registry does not batch (sequential nucleus, `spd_lsp.api.METHOD`), the experimental `reset_every`,
and models whose cache is not a plain per-layer key/value cache.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch

from ngram_db import NgramSource
from spd_lsp.engine.decoding.lm import ModelRunner, common_prefix_length, prefill_together
from spd_lsp.engine.decoding.padding import padded_cache, plain_cache
from spd_lsp.engine.decoding.methods import start_state
from spd_lsp.engine.decoding.stepping import decode_step
from spd_lsp.engine.fast.compile import serving
from spd_lsp.api import METHOD, Cancelled, DecodeOptions, DecodeRequest, DecodeResult, Timings, never_cancelled
from spd_lsp.engine.prompt.build import Prompt
from spd_lsp.engine.decoding.verify import Verdict, drive, packed_logits, row_logits, row_verdicts
from spd_lsp.engine.decoding.slots import BatchCache

log = logging.getLogger(__name__)
IDLE_RELEASE_S = 5.0  # an idle engine frees its batch buffers after this long
RUNNERS = 16  # prompt caches kept, one per affinity key (an editor's document), least recently used out


@dataclass
class BatchJob:
    """One `complete` request as the scheduler sees it; `future` gets a DecodeResult or an exception."""

    request: DecodeRequest
    ngrams: NgramSource | None = None
    affinity: str = ""
    future: Future = field(default_factory=Future)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.perf_counter)

    @property
    def options(self) -> DecodeOptions:
        return self.request.options

    def cancel(self) -> None:
        self.cancel_event.set()

    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


@dataclass(eq=False)
class Member:
    job: BatchJob
    state: Any  # a stepping.StepState
    built: Prompt  # its prompt as `LocalEngine.prompt` builds it
    prompt: list[int]
    remainder: str
    length: int  # real (unpadded) positions of each of its rows
    prompt_rows: list[tuple[torch.Tensor, torch.Tensor]]  # its prompt's key/values per layer, until it joins
    rows: int = 1  # its rows in the batch cache


@dataclass(eq=False)
class Joiner:
    """A request whose prompt is being prefilled, a chunk between two steps, before it joins."""

    job: BatchJob
    built: Prompt
    runner: ModelRunner
    reused: int | None = None  # prompt tokens its cache held before its first chunk

    @property
    def prompt(self) -> list[int]:
        return self.built.healed.prompt_ids

    @property
    def remainder(self) -> str:
        return self.built.healed.remainder

    def to_go(self) -> int:
        return len(self.prompt) - common_prefix_length(self.runner.cached_ids, self.prompt)


def batchable(job: BatchJob) -> bool:
    """The batch steps this request with others: its method batches, and it never re-feeds a draft on its own."""
    options = job.options
    return METHOD[options.method].batched and not options.experimental.reset_every


def _unwrapped(outcome: Any) -> Any:
    """A `prefill_together` row: its (logits, reused), or the exception it raised, raised."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def verifies_alone(member: Member) -> bool:
    """A superposed request that repairs by continuing its drafts: that decodes on its own prompt cache."""
    options = member.state.options
    return hasattr(member.state, "verifying") and bool(options.verify_rounds) and options.verify_repair == "continue"


def verify_together(runner: ModelRunner, members: list[Member], counts: dict[str, int]) -> list[list]:
    """The drafts of requests that leave the batch together; the superposed ones verified in ONE forward a round.

    Every request's rows run as a prefix tree on its own prompt's key/values (a batch row each,
    left-padded and masked), as `verify` packs them alone; rows of every method's drafts otherwise.
    """
    verifyings = [getattr(m.state, "verifying", lambda: None)() for m in members]
    going = [i for i, v in enumerate(verifyings) if v is not None]

    def judge_round(rounds: list[tuple[int, list[tuple[int, ...]]]]) -> list[list[Verdict]]:
        judged = [members[going[i]] for i, _ in rounds]
        counts["verifyForwards"] += 1
        counts["verifyRows"] += len(judged)
        cache = padded_cache([m.prompt_rows for m in judged], max(len(m.prompt) for m in judged))
        packed = packed_logits(runner, cache, [rows for _, rows in rounds], [len(m.prompt) for m in judged])
        return [row_verdicts(row_logits(m.state.first_logits, later, rows), rows, m.remainder, m.state.rules)
                for m, (later, _), (_, rows) in zip(judged, packed, rounds)]

    verified = dict(zip(going, drive([verifyings[i] for i in going], judge_round)))
    return [verified[i] if i in verified else m.state.drafts() for i, m in enumerate(members)]


class Batcher:
    """The engine's one model thread: admits jobs between steps and steps the batch.

    `submit` is thread-safe; everything else runs on the thread. `max_batch` caps the rows.
    """

    def __init__(self, engine: Any, *, max_batch: int = 32) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self._incoming: queue.Queue[BatchJob | None] = queue.Queue()
        self._runners: OrderedDict[str, ModelRunner] = OrderedDict()
        self._members: list[Member] = []
        self._waiting: list[BatchJob] = []
        self._joining: list[Joiner] = []
        self._batch = BatchCache(engine.runner)
        self.counts = {"batched": 0, "alone": 0, "cancelled": 0, "failed": 0, "steps": 0, "maxBatched": 0,
                       "verifyForwards": 0, "verifyRows": 0,  # verification forwards, and the requests' rounds they ran
                       "prefillForwards": 0}  # prefill forwards of requests joining
        # Model-thread time: whole steps, their batch forwards (membership changes included; the rest of a step is
        # host work), the verifications of requests leaving, and the prefills of requests joining.
        self.seconds = {"step": 0.0, "forward": 0.0, "verify": 0.0, "prefill": 0.0}
        self._thread = threading.Thread(target=self._run, name="spd-engine-model", daemon=True)
        self._thread.start()

    def submit(self, job: BatchJob) -> Future:
        self._incoming.put(job)
        return job.future

    def status(self) -> dict[str, Any]:
        queued = self._incoming.qsize() + len(self._waiting) + len(self._joining)
        return {"rows": len(self._members), "queued": queued, **self.counts,
                **{f"{name}Seconds": round(value, 3) for name, value in self.seconds.items()}}

    def close(self, timeout: float = 10.0) -> None:
        self._incoming.put(None)
        self._thread.join(timeout)

    # -- the model thread ------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self._admit(block=not self._members and not self._joining):
                break
            with serving():  # a background compile waits while requests are in the batch (engine/fast/compile.py)
                self._prefill_some()
                self._step()

    def _admit(self, *, block: bool) -> bool:
        """Take new jobs; run the unbatchable ones; queue the others to join. False once closed."""
        try:
            while True:
                job = self._next_job(block=block and not self._waiting)
                block = False
                if job is None:
                    self._fail_all(RuntimeError("the engine is shutting down"))
                    return False
                self._waiting.append(job)
        except queue.Empty:
            pass
        waiting, self._waiting = self._waiting, []
        for job in waiting:
            if job.cancelled():
                self._finish(job, error=Cancelled())
            elif len(self._members) + len(self._joining) >= self.max_batch:
                self._waiting.append(job)
            else:
                self._start(job)
        return True

    def _next_job(self, *, block: bool) -> BatchJob | None:
        """The next incoming job (queue.Empty where none and not `block`); waiting idle frees the batch's
        buffers after `IDLE_RELEASE_S`."""
        if not block:
            return self._incoming.get_nowait()
        try:
            return self._incoming.get(timeout=IDLE_RELEASE_S)
        except queue.Empty:
            self._batch.release()
            return self._incoming.get()

    def _start(self, job: BatchJob) -> None:
        try:
            if job.options.method not in METHOD or not batchable(job):
                self.counts["alone"] += 1
                self._finish(job, result=self.engine.complete(job.request, job.cancelled))
                return
            built = self.engine.prompt(job.request)
        except BaseException as exc:  # noqa: BLE001 - a bad request fails alone
            self._finish(job, error=exc)
            return
        self._joining.append(Joiner(job, built, self._runner(job.affinity)))

    def _prefill_some(self) -> None:
        """Prefill joining requests between two steps, about one chunk's worth of tokens in all (padding
        counted), fewest tokens to go first: a cold prompt no longer stalls the batch for all of its prefill.

        Those that fit whole (an editor's next request: a few tokens after its cached prompt) run in ONE
        forward (`prefill_together`); then the others a chunk each, exactly the chunks `ModelRunner.prefill`
        runs alone (a prefix at a time)."""
        started = time.perf_counter()
        for joiner in [j for j in self._joining if j.job.cancelled()]:
            self._joining.remove(joiner)
            self.counts["cancelled"] += 1
            self._finish(joiner.job, error=Cancelled())
        runners = {id(j.runner): j.runner for j in self._joining}.values()
        forwards = sum(runner.forwards for runner in runners)
        budget = self.engine.runner.chunk_tokens
        together = self._fitting_together(budget)
        if len(together) > 1:
            budget -= len(together) * max(1, together[-1].to_go())
            prefilled = prefill_together([j.runner for j in together], [j.prompt for j in together],
                                         [j.job.cancelled for j in together])
            for joiner, outcome in zip(together, prefilled):
                self._join(joiner, lambda: self._joined(joiner, *_unwrapped(outcome)))
        while self._joining and budget > 0:
            joiner = min(self._joining, key=Joiner.to_go)
            budget -= max(1, min(joiner.to_go(), joiner.runner.chunk_tokens))
            self._join(joiner, lambda: self._prefill_chunk(joiner))
        self.counts["prefillForwards"] += sum(runner.forwards for runner in runners) - forwards
        self.seconds["prefill"] += time.perf_counter() - started

    def _fitting_together(self, budget: int) -> list[Joiner]:
        """Joiners whose whole rest of prompt, after a prompt cache they continue, fits `budget` tokens as
        rows of one forward (each padded to the longest), fewest to go first; one per runner."""
        fitting: list[Joiner] = []
        for joiner in sorted(self._joining, key=Joiner.to_go):
            to_go, runner = max(1, joiner.to_go()), joiner.runner
            continues = to_go < len(joiner.prompt) and plain_cache(runner.cache)
            if not continues or to_go > runner.chunk_tokens or any(j.runner is runner for j in fitting):
                continue
            if (len(fitting) + 1) * to_go > budget:
                break
            fitting.append(joiner)
        return fitting

    def _join(self, joiner: Joiner, prefill: Callable[[], Member | None]) -> None:
        """Run `prefill` (a chunk of the joiner's prompt); the joiner joins the batch once it gives its Member."""
        try:
            member = prefill()
        except BaseException as exc:  # noqa: BLE001 - a bad request fails alone
            self._joining.remove(joiner)
            self._finish(joiner.job, error=exc)
            return
        if member is not None:
            self._joining.remove(joiner)
            self.counts["batched"] += 1
            self._members.append(member)
            self.counts["maxBatched"] = max(self.counts["maxBatched"], len(self._members))

    def _prefill_chunk(self, joiner: Joiner) -> Member | None:
        """One prefill chunk of `joiner`; its Member once its prompt is in (None before, and where it ran alone)."""
        job, runner, prompt = joiner.job, joiner.runner, joiner.prompt
        end = common_prefix_length(runner.cached_ids, prompt) + runner.chunk_tokens
        if end < len(prompt):
            _, reused = runner.prefill(prompt[:end], job.cancelled)
            joiner.reused = reused if joiner.reused is None else joiner.reused
            return None
        return self._joined(joiner, *runner.prefill(prompt, job.cancelled))

    def _joined(self, joiner: Joiner, logits: torch.Tensor, reused: int) -> Member | None:
        """The Member of `joiner`, whose prompt is in its runner's cache with these last logits
        (None where its cache is not one the batch takes: it then ran alone)."""
        job, runner, prompt = joiner.job, joiner.runner, joiner.prompt
        timings = Timings()
        timings.reused_tokens = reused if joiner.reused is None else joiner.reused
        timings.prefill_tokens = len(prompt) - timings.reused_tokens
        timings.prefill_s = time.perf_counter() - job.started
        if not plain_cache(runner.cache):
            self.counts["alone"] += 1
            self._finish(job, result=self.engine.complete(job.request, job.cancelled))
            return None
        rules = self.engine.draft_rules(job.request, joiner.built)
        # The batch checks cancellation between steps; a sampling request's generator is its own (seeded).
        state = start_state(job.options, logits, prompt, joiner.remainder, rules, job.ngrams, cancelled=never_cancelled,
                            timings=timings)
        # Views, not copies: a runner's cache is never written in place (a DynamicLayer appends by
        # concatenating into new tensors and crops by slicing), so these stay the prompt's key/values
        # while the runner serves the editor's next request; the batch and verification copy from them.
        rows = [(layer.keys[:, :, : len(prompt)], layer.values[:, :, : len(prompt)]) for layer in runner.cache.layers]
        return Member(job, state, joiner.built, prompt, joiner.remainder, len(prompt), rows)

    def _runner(self, affinity: str) -> ModelRunner:
        runner = self._runners.pop(affinity, None)
        if runner is None:
            base = self.engine.runner
            runner = ModelRunner(base.model, base.device, chunk_tokens=base.chunk_tokens, slots=1)
        self._runners[affinity] = runner
        while len(self._runners) > RUNNERS:
            self._runners.popitem(last=False)
        return runner

    def _step(self) -> None:
        for member in [m for m in self._members if m.job.cancelled()]:
            self.counts["cancelled"] += 1
            self._leave(member, error=Cancelled())
        if not self._members:
            return
        members = list(self._members)
        by_state = {id(m.state): m for m in members}

        def forward(states: list[Any], inputs: torch.Tensor) -> torch.Tensor:
            started = time.perf_counter()
            try:
                return self._batch.forward([by_state[id(s)] for s in states], inputs)
            finally:
                self.seconds["forward"] += time.perf_counter() - started

        started = time.perf_counter()
        try:
            decode_step(self.engine.runner, [m.state for m in members], forward)
            self.seconds["step"] += time.perf_counter() - started
        except BaseException as exc:  # noqa: BLE001 - a failed step fails its batch, not the engine
            log.exception("a batch step failed")
            self.counts["failed"] += len(members)
            for member in members:
                self._leave(member, error=exc)
            self._batch = BatchCache(self.engine.runner)
            return
        self.counts["steps"] += 1
        self._leave_together([m for m in members if m.state.done])

    def _leave(self, member: Member, *, error: BaseException) -> None:
        self._members.remove(member)
        self._finish(member.job, error=error)

    def _leave_together(self, members: list[Member]) -> None:
        """Requests whose drafts are final leave; their verifications run together (`verify_together`),
        but for those that repair by decoding on their own prompt cache (`verifies_alone`)."""
        for member in [m for m in members if m.job.cancelled()]:
            self.counts["cancelled"] += 1
            self._leave(member, error=Cancelled())
        members = [m for m in members if m in self._members]
        for member in members:
            self._members.remove(member)
        for member in [m for m in members if verifies_alone(m)]:
            try:
                self._answer(member, self._final_alone(member))
            except BaseException as exc:  # noqa: BLE001 - cancelled or failed while verifying: this request only
                self._finish(member.job, error=exc)
        members = [m for m in members if not verifies_alone(m)]
        if not members:
            return
        started = time.perf_counter()
        try:
            finals = verify_together(self.engine.runner, members, self.counts)
            self.seconds["verify"] += time.perf_counter() - started
        except BaseException as exc:  # noqa: BLE001 - a failed verification fails its requests, not the engine
            log.exception("a verification failed")
            self.counts["failed"] += len(members)
            for member in members:
                self._finish(member.job, error=exc)
            return
        for member, final in zip(members, finals):
            self._answer(member, final)

    def _final_alone(self, member: Member) -> list:
        """A superposed member's drafts verified on its own prompt cache, as `LocalEngine.complete` does."""
        runner = self._runner(member.job.affinity)
        runner.prefill(member.prompt, member.job.cancelled)  # the prompt is still cached unless evicted
        return member.state.final(runner, cancelled=member.job.cancelled)

    def _answer(self, member: Member, final: list) -> None:
        job = member.job
        drafts = self.engine.drafts(final, job.request, member.built)
        member.state.timings.total_s = time.perf_counter() - job.started
        self._finish(job, result=DecodeResult(drafts, member.state.timings, job.options.method, member.built.info()))

    def _finish(self, job: BatchJob, *, result: DecodeResult | None = None, error: BaseException | None = None) -> None:
        if job.future.done():
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)

    def _fail_all(self, error: BaseException) -> None:
        for member in list(self._members):
            self._leave(member, error=error)
        for job in self._waiting + [j.job for j in self._joining]:
            self._finish(job, error=error)
        self._waiting, self._joining = [], []


