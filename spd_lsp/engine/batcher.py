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

A request alone (one typist: the common case) runs as in process: while no other request is
in the batch its prompt is prefilled whole, in the runner's own timed chunks that stop within a
decoder layer when it is cancelled or another request comes (and resume where they stopped), and
it steps on its runner's own prompt cache (`SoloCache`, the fast path's fused step) and is verified
there; a request that comes meanwhile makes it join the batch's cache with the rows it has.
Background requests (`DecodeRequest.background`: a front end's anticipated next suggestion, and
`warm` jobs, its idle prefill) run only while no other request waits: one that comes puts them back
in the queue, where they start again from their prompt cache. Each front end (affinity key) keeps
`CACHE_SLOTS` prompt caches as a `LocalEngine` does, `CACHES` in all.

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
from spd_lsp.engine.decoding.lm import (CACHE_SLOTS, PARKED_BYTES, ModelRunner, cache_bytes, common_prefix_length,
                                         prefill_together)
from spd_lsp.engine.decoding.padding import padded_cache, plain_cache
from spd_lsp.engine.decoding.methods import start_state
from spd_lsp.engine.decoding.stepping import SoloCache, decode_step
from spd_lsp.engine.fast.compile import serving
from spd_lsp.api import METHOD, Cancelled, DecodeOptions, DecodeRequest, DecodeResult, Timings, never_cancelled
from spd_lsp.engine.prompt.build import Prompt
from spd_lsp.engine.decoding.verify import Verdict, drive, packed_logits, row_logits, row_verdicts
from spd_lsp.engine.decoding.slots import BatchCache
from spd_lsp.engine.memory import give_back

log = logging.getLogger(__name__)
IDLE_RELEASE_S = 5.0  # an idle engine frees its batch buffers after this long
RUNNERS = 16  # runners kept, one per affinity key (a front end), least recently used out
CACHES = 16  # prompt caches kept by all runners together (each up to CACHE_SLOTS), least recently used runner's out
# Bytes all runners' parked caches may hold together (each runner's own within PARKED_BYTES), least recently used
# runner's out: at a 1.7B's shape 16 parked caches of the shipped prompt would hold ~4.8 GB.
ENGINE_PARKED_BYTES = 2 * PARKED_BYTES
SOLO_METHODS = ("superposed", "greedy")
PHASES = ("idle", "prefill", "step", "verify", "background prefill", "background step", "background verify")  # one row a request: it steps on its runner's own cache while alone


@dataclass
class BatchJob:
    """One `complete` request as the scheduler sees it; `future` gets a DecodeResult or an exception."""

    request: DecodeRequest
    ngrams: NgramSource | None = None
    affinity: str = ""
    warm: bool = False  # prefill its prompt only (a front end's idle warm-up): answers no drafts, its tokens run
    future: Future = field(default_factory=Future)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.perf_counter)
    taken: float | None = None  # when the model thread took it up (its queue time ends)
    behind: str = "idle"  # what the model thread was doing when it came (`Batcher.queued`)

    @property
    def options(self) -> DecodeOptions:
        return self.request.options

    @property
    def background(self) -> bool:
        """Work nobody waits for yet: it runs only while no other request waits."""
        return self.warm or self.request.background

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
    # Its key/values per layer that the batch cache copies when it joins: its prompt's (views of its runner's
    # cache), or, after steps on its own, copies of those `length` positions.
    prompt_rows: list[tuple[torch.Tensor, torch.Tensor]]
    runner: ModelRunner
    rows: int = 1  # its rows in the batch cache
    solo: SoloCache | None = None  # stepping on its runner's own cache (alone in the batch)
    own_rows: bool = False  # `prompt_rows` are copies (no longer views of its runner's cache)
    batched: bool = False  # it has stepped in the batch's cache (it never goes back to its runner's own)


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
        cache = padded_cache([[(k[:, :, : len(m.prompt)], v[:, :, : len(m.prompt)]) for k, v in m.prompt_rows]
                              for m in judged], max(len(m.prompt) for m in judged))
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
                       "prefillForwards": 0,  # prefill forwards of requests joining
                       "soloSteps": 0,  # steps of a request alone, on its runner's own cache
                       "preempted": 0,  # background requests put back for a request that came
                       "warmed": 0}  # warm-ups done (prefills that answer no drafts)
        # Model-thread time: whole steps, their batch forwards (membership changes included; the rest of a step is
        # host work), the verifications of requests leaving, and the prefills of requests joining.
        self.seconds = {"step": 0.0, "forward": 0.0, "verify": 0.0, "prefill": 0.0}
        # Requests' queue time (frame read to taken up), by what the model thread was doing when each came.
        self.queued = {phase: 0.0 for phase in PHASES}
        self._doing = "idle"
        self._thread = threading.Thread(target=self._run, name="spd-engine-model", daemon=True)
        self._thread.start()

    def submit(self, job: BatchJob) -> Future:
        job.behind = self._doing
        self._incoming.put(job)
        return job.future

    def status(self) -> dict[str, Any]:
        queued = self._incoming.qsize() + len(self._waiting) + len(self._joining)
        runners = list(self._runners.values())
        caches = sum(len(r.parked) + (r.cache is not None) for r in runners)
        held = sum(r.held_bytes() for r in runners)
        return {"rows": len(self._members), "queued": queued, "promptCaches": caches,
                "promptCacheBytes": held, "batchCacheBytes": self._batch.nbytes(),
                "parkedBudgetMegabytes": round(ENGINE_PARKED_BYTES / 1e6),
                **self.counts,
                **{f"{name}Seconds": round(value, 3) for name, value in self.seconds.items()},
                "queueSecondsBehind": {name: round(value, 3) for name, value in self.queued.items() if value}}

    def close(self, timeout: float = 10.0) -> None:
        self._incoming.put(None)
        self._thread.join(timeout)

    # -- the model thread ------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._doing = "idle"
            if not self._admit(block=not self._members and not self._joining):
                break
            with serving():  # a background compile waits while requests are in the batch (engine/fast/compile.py)
                self._doing = self._phase("prefill", [j.job for j in self._joining])
                self._prefill_some()
                self._doing = self._phase("step", [m.job for m in self._members])
                self._step()

    @staticmethod
    def _phase(name: str, jobs: list[BatchJob]) -> str:
        """`name`, or "background <name>" where only background work does it."""
        return name if any(not j.background for j in jobs) or not jobs else f"background {name}"

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
            give_back()  # the batch's buffers and the requests' transients off the resident memory
            return self._incoming.get()

    def _start(self, job: BatchJob) -> None:
        job.taken = time.perf_counter()
        if not job.background:
            self.queued[job.behind] += job.taken - job.started
        try:
            if not job.warm and (job.options.method not in METHOD or not batchable(job)):
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
        forward (`prefill_together`); then, where no request is in the batch (no step waits), the one with
        the fewest tokens to go is prefilled whole as `LocalEngine` does (`_prefill_whole`); else the others
        a chunk each, exactly the chunks `ModelRunner.prefill` runs alone (a prefix at a time). Background
        joiners wait while any other request is joining or in the batch."""
        started = time.perf_counter()
        for joiner in [j for j in self._joining if j.job.cancelled()]:
            self._joining.remove(joiner)
            self.counts["cancelled"] += 1
            self._finish(joiner.job, error=Cancelled())
        if self._foreground():
            self._preempt()
        joining = [j for j in self._joining if not (j.job.background and self._foreground())]
        runners = {id(j.runner): j.runner for j in joining}.values()
        forwards = sum(runner.forwards for runner in runners)
        budget = self.engine.runner.chunk_tokens
        together = self._fitting_together(joining, budget)
        if len(together) > 1:
            budget -= len(together) * max(1, together[-1].to_go())
            for joiner in together:
                self._claim(joiner.runner)
            prefilled = prefill_together([j.runner for j in together], [j.prompt for j in together],
                                         [j.job.cancelled for j in together])
            for joiner, outcome in zip(together, prefilled):
                self._join(joiner, lambda: self._joined(joiner, *_unwrapped(outcome)))
            joining = [j for j in joining if j in self._joining]
        if joining and not self._members:
            self._prefill_whole(min(joining, key=Joiner.to_go))
            joining = []
        while joining and budget > 0:
            joiner = min(joining, key=Joiner.to_go)
            budget -= max(1, min(joiner.to_go(), joiner.runner.chunk_tokens))
            self._claim(joiner.runner)
            self._join(joiner, lambda: self._prefill_chunk(joiner))
            joining = [j for j in joining if j in self._joining]
        self.counts["prefillForwards"] += sum(runner.forwards for runner in runners) - forwards
        self.seconds["prefill"] += time.perf_counter() - started

    def _prefill_whole(self, joiner: Joiner) -> None:
        """`joiner`'s whole prompt as `ModelRunner.prefill` runs it alone (its timed chunks, each stopping within a
        decoder layer): no request is in the batch, so no step waits for it. A request that comes meanwhile
        stops it (it resumes where it stopped, `lm.Partial`), and so does its own cancel."""
        job, runner = joiner.job, joiner.runner
        self._claim(runner)
        to_go = joiner.to_go()

        def stop() -> bool:
            return job.cancelled() or not self._incoming.empty()

        try:
            logits, reused = runner.prefill(joiner.prompt, stop)
        except Cancelled as exc:
            joiner.reused = len(joiner.prompt) - to_go if joiner.reused is None else joiner.reused
            if job.cancelled():
                self._joining.remove(joiner)
                self.counts["cancelled"] += 1
                self._finish(job, error=exc)
            return  # it goes on after the request that came is admitted
        except BaseException as exc:  # noqa: BLE001 - a bad request fails alone
            self._joining.remove(joiner)
            self._finish(job, error=exc)
            return
        self._join(joiner, lambda: self._joined(joiner, logits, reused))

    def _foreground(self) -> bool:
        """Whether a request someone waits for is joining or in the batch."""
        return any(not j.job.background for j in self._joining) or any(not m.job.background for m in self._members)

    def _preempt(self) -> None:
        """Background requests in the batch go back to joining: a request someone waits for came. They start
        again from their prompt, which their runner still holds."""
        for member in [m for m in self._members if m.job.background]:
            self._members.remove(member)
            self._put_back(member)

    def _put_back(self, member: Member) -> None:
        """A background member (out of the batch) goes back to joining, to start again from its prompt."""
        if member.solo is not None:
            member.runner.rewind(len(member.prompt))
            member.solo = None
        self.counts["preempted"] += 1
        self._joining.append(Joiner(member.job, member.built, member.runner))

    def _yields(self, job: BatchJob) -> bool:
        """Whether `job` is background work and a request someone waits for has come (not yet taken up): it then
        gives way at once, even mid-verification."""
        if not job.background:
            return False
        with self._incoming.mutex:
            queued = list(self._incoming.queue)
        return any(j is not None and not j.background for j in queued + self._waiting)

    def _claim(self, runner: ModelRunner) -> None:
        """Before `runner` prefills another prompt (over its buffers, in place): a member of its cache that is
        cancelled leaves; one stepping on it joins the batch's cache (its rows copied); one in the batch keeps a
        copy of its prompt's key/values for its verification."""
        for member in [m for m in self._members if m.runner is runner and not m.own_rows]:
            if member.job.cancelled():
                self.counts["cancelled"] += 1
                self._leave(member, error=Cancelled())
            elif member.solo is not None:
                self._unsolo(member)
            else:
                member.prompt_rows = [(k.clone(), v.clone()) for k, v in member.prompt_rows]
                member.own_rows = True

    def _unsolo(self, member: Member) -> None:
        """A member that stepped on its runner's own cache joins the batch's: its `length` positions are copied
        (the batch copies them again when it joins), and the runner's cache is its prompt again."""
        cache = member.solo.private or member.runner.cache
        member.prompt_rows = [(layer.keys[:, :, : member.length].clone(), layer.values[:, :, : member.length].clone())
                              for layer in cache.layers]
        member.solo, member.own_rows = None, True
        member.runner.rewind(len(member.prompt))

    def _fitting_together(self, joining: list[Joiner], budget: int) -> list[Joiner]:
        """Of `joining`, those whose whole rest of prompt, after a prompt cache they continue, fits `budget`
        tokens as rows of one forward (each padded to the longest), fewest to go first; one per runner."""
        fitting: list[Joiner] = []
        for joiner in sorted(joining, key=Joiner.to_go):
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
        if member is not None or joiner.job.future.done():  # joined, or answered (a warm-up, one run alone)
            self._joining.remove(joiner)
        if member is not None:
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
        taken = job.taken if job.taken is not None else job.started
        timings.queue_s = taken - job.started
        timings.prefill_s = time.perf_counter() - taken
        if job.warm:
            self.counts["warmed"] += 1
            timings.total_s = time.perf_counter() - job.started
            self._finish(job, result=DecodeResult([], timings, job.options.method, joiner.built.info()))
            return None
        if not plain_cache(runner.cache):
            self.counts["alone"] += 1
            self._finish(job, result=self.engine.complete(job.request, job.cancelled))
            return None
        rules = self.engine.draft_rules(job.request, joiner.built)
        # The batch checks cancellation between steps; a sampling request's generator is its own (seeded).
        state = start_state(job.options, logits, prompt, joiner.remainder, rules, job.ngrams, cancelled=never_cancelled,
                            timings=timings)
        # Views of the runner's cache: the batch copies them when the member joins it, and verification reads
        # them; before the runner prefills another prompt (in place, on the fast path's buffers), `_claim` copies
        # what a member still needs.
        rows = [(layer.keys[:, :, : len(prompt)], layer.values[:, :, : len(prompt)]) for layer in runner.cache.layers]
        return Member(job, state, joiner.built, prompt, joiner.remainder, len(prompt), rows, runner)

    def _runner(self, affinity: str) -> ModelRunner:
        """The runner of `affinity` (a front end): its prompt caches, as a `LocalEngine`'s runner keeps them
        (`CACHE_SLOTS`), prefilled in timed chunks that stop within a layer, as there; `CACHES` in all."""
        runner = self._runners.pop(affinity, None)
        if runner is None:
            base = self.engine.runner
            runner = ModelRunner(base.model, base.device, slots=CACHE_SLOTS, chunk_seconds=base.chunk_seconds,
                                 layer_seconds=base.layer_seconds)
            runner.chunk_tokens = base.chunk_tokens  # the size of a shared forward (`prefill_together`), as the base's
        self._runners[affinity] = runner
        while len(self._runners) > RUNNERS:
            self._drop_runner(next(iter(self._runners)))
        caches = sum(len(r.parked) + (r.cache is not None) for r in self._runners.values())
        parked = sum(cache_bytes(cache) for r in self._runners.values() for cache, _ in r.parked)
        for old in list(self._runners.values()):  # least recently used first
            if (caches <= CACHES and parked <= ENGINE_PARKED_BYTES) or old is runner:
                break
            caches -= len(old.parked)
            parked -= sum(cache_bytes(cache) for cache, _ in old.parked)
            old.parked = []
        return runner

    def _drop_runner(self, affinity: str) -> None:
        """Forget the least recently used front end's runner: its members keep copies of their rows."""
        runner = self._runners.pop(affinity)
        self._claim(runner)

    def _step(self) -> None:
        for member in [m for m in self._members if m.job.cancelled()]:
            self.counts["cancelled"] += 1
            self._leave(member, error=Cancelled())
        if not self._members:
            return
        members = list(self._members)
        (first,) = members if len(members) == 1 else (None,)
        if first is not None and not first.batched and first.job.options.method in SOLO_METHODS:
            self._step_solo(first)
            return
        for member in [m for m in members if m.solo is not None]:
            self._unsolo(member)
        by_state = {id(m.state): m for m in members}

        def forward(states: list[Any], inputs: torch.Tensor) -> torch.Tensor:
            started = time.perf_counter()
            try:
                return self._batch.forward([by_state[id(s)] for s in states], inputs)
            finally:
                self.seconds["forward"] += time.perf_counter() - started

        for member in members:
            member.batched = True
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

    def _step_solo(self, member: Member) -> None:
        """A step of the batch's only request on its runner's own prompt cache, as `LocalEngine` steps it (the
        fast path's fused step); its `length` follows, for when another request comes and it joins the batch."""
        if member.solo is None:
            member.solo = SoloCache(member.runner)
        started = time.perf_counter()
        try:
            decode_step(member.runner, [member.state], member.solo.forward)
            self.seconds["step"] += time.perf_counter() - started
            self.seconds["forward"] += time.perf_counter() - started  # a solo step is its forward (the fused step)
        except BaseException as exc:  # noqa: BLE001 - a failed step fails its request, not the engine
            log.exception("a step failed")
            self.counts["failed"] += 1
            member.solo = None
            member.runner.rewind(len(member.prompt))
            self._leave(member, error=exc)
            return
        if not member.state.done:
            member.length += 1
        self.counts["steps"] += 1
        self.counts["soloSteps"] += 1
        self._leave_together([member] if member.state.done else [])

    def _leave(self, member: Member, *, error: BaseException) -> None:
        self._members.remove(member)
        self._finish(member.job, error=error)

    def _leave_together(self, members: list[Member]) -> None:
        """Requests whose drafts are final leave; their verifications run together (`verify_together`),
        but for those that repair by decoding on their own prompt cache (`verifies_alone`) and one that stepped
        on its own (verified there, as in process)."""
        for member in [m for m in members if m.job.cancelled()]:
            self.counts["cancelled"] += 1
            self._leave(member, error=Cancelled())
        members = [m for m in members if m in self._members]
        self._doing = self._phase("verify", [m.job for m in members])
        for member in members:
            self._members.remove(member)
        alone = [m for m in members if verifies_alone(m) or m.solo is not None]  # (`_final_alone` ends `solo`)
        for member in alone:
            if self._yields(member.job):
                self._put_back(member)
                continue
            started = time.perf_counter()
            try:
                self._answer(member, self._final_alone(member))
            except Cancelled as exc:
                self._put_back(member) if not member.job.cancelled() else self._finish(member.job, error=exc)
            except BaseException as exc:  # noqa: BLE001 - failed while verifying: this request only
                self._finish(member.job, error=exc)
            finally:
                self.seconds["verify"] += time.perf_counter() - started
        members = [m for m in members if m not in alone]
        for member in [m for m in members if self._yields(m.job)]:
            members.remove(member)
            self._put_back(member)
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
        """A member's drafts verified on its own prompt cache, as `LocalEngine.complete` does: where it stepped
        there, at once (the runner's cache then goes back to the prompt); else after its prompt again."""
        runner, state, job = member.runner, member.state, member.job

        def stop() -> bool:  # background work also stops for a request someone waits for (`_put_back`)
            return job.cancelled() or self._yields(job)

        if member.solo is None:
            runner.prefill(member.prompt, stop)  # the prompt is still cached unless evicted
        member.solo = None
        try:
            return state.final(runner, cancelled=stop) if hasattr(state, "final") else state.drafts()
        finally:
            runner.rewind(len(member.prompt))

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


