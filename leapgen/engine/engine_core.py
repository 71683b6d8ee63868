"""The engine's step loop: :class:`EngineCore`, the base of :class:`~leapgen.engine.llm_engine.LLM`.

One responsibility: drive the running requests one step further. A step::

    admit waiting requests -> take finished grammar compiles
        -> start the batch's bitmask fill (worker thread)
        -> ONE forward pass over every request with pending tokens
           (prefills, decodes and jump-forward extends packed together)
        -> wait for the fill -> mask -> sample -> accept -> stop?
        -> jump-forward (retokenize, token healing, crop KV, extend next step)

Requests join and leave between steps (:class:`~leapgen.engine.llm_engine.LLM`
queues them and freezes their outputs). A constrained request's compile starts
when it is added (on the grammar manager's thread); its prefill runs while the
compile does, and if the grammar is still not ready it waits aside with its
logits (``Request.stored_logits``) while the others go on. A failed compile
fails that request alone.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any, Sequence

import torch

from leapgen.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from leapgen.engine import grammar_log
from leapgen.engine.grammar_manager import GrammarManager
from leapgen.engine.jump_forward import JumpForward, common_prefix_length, try_jump_forward
from leapgen.engine.logprobs import entry_of, prompt_rows_needed, rows_needed, score_batch
from leapgen.engine.mask_fill import allows_non_stop
from leapgen.engine.model_runner import ModelRunner
from leapgen.engine.parallel_sampling import prompt_ready, rides_on, share_prompt, waits_for_leader
from leapgen.engine.prefix_cache import PrefixCache
from leapgen.engine.request import FinishReason, Request
from leapgen.engine.sampler import sample
from leapgen.engine.scheduler import Scheduler
from leapgen.engine.stats import EngineStats
from leapgen.errors import StackDepthError


class EngineCore:
    """The step loop over the requests of a :class:`~leapgen.engine.scheduler.Scheduler`.

    Not built alone: :class:`~leapgen.engine.llm_engine.LLM` sets the
    attributes below and queues the requests.

    Attributes
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    model_runner : ModelRunner
    grammar : GrammarManager
    scheduler : Scheduler
    stats : EngineStats
        Counters, mutated by every step.
    prefix_cache : PrefixCache
    step_trace : collections.deque of dict
        See :class:`~leapgen.engine.llm_engine.LLM`.
    jump_forward_min_chars : int
        Forced text shorter than this is sampled, not jumped forward.
    """

    tokenizer: Any
    model_runner: ModelRunner
    grammar: GrammarManager
    scheduler: Scheduler
    stats: EngineStats
    prefix_cache: PrefixCache
    step_trace: deque
    jump_forward_min_chars: int

    def step(self) -> list[Request]:
        """Run one engine step over the running batch.

        Returns
        -------
        list of Request
            The requests that finished in this step.
        """
        sched = self.scheduler
        for req in sched.admit():
            req.kv_cache = self.model_runner.new_cache()
            if req.leader is not None and prompt_ready(req.leader):
                share_prompt(req.leader, req)
            elif not waits_for_leader(req):
                self._reuse_prefix(req)
        self.stats.steps += 1
        blocked = [r.compile_future for r in sched.running if r.compile_future is not None
                   and r.stored_logits is not None]
        if blocked and len(blocked) == len(sched.running):
            # Everyone waits for a grammar: sleep on the compiles, not on the GIL.
            wait(blocked, timeout=0.05, return_when=FIRST_COMPLETED)
        for req in list(sched.running):
            self._guard(req, self._take_grammar, req)
        # Prefill a compiling request too (it overlaps its compile); then it waits aside.
        fwd = [r for r in sched.running if not r.is_finished and r.pending_ids and r.stored_logits is None
               and not waits_for_leader(r)]
        # A sample whose leader prefills the prompt in this pass samples from the leader's row (rides on it).
        ready = [r for r in sched.running if not r.is_finished and r.grammar_ready and r.deferred_finish is None
                 and r.params.max_tokens and (r.stored_logits is not None or r in fwd or rides_on(r, fwd))]
        # Constrained requests first: row i of the bitmask is row i of the batch.
        sampling = [r for r in ready if r.matcher is not None] + [r for r in ready if r.matcher is None]
        num_masked = sum(r.matcher is not None for r in ready)
        fill = bitmask = None
        fill_times: dict = {}
        trace = {"step": self.stats.steps, "num_forward": len(fwd), "num_masked": num_masked}
        if num_masked:
            bitmask = allocate_token_bitmask(num_masked, self.model_runner.vocab_size)
            fill = self.grammar.batch_fill_async([r.matcher for r in sampling[:num_masked]], bitmask, fill_times,
                                                 request_ids=[r.request_id for r in sampling[:num_masked]])
        trace["forward_start"] = time.perf_counter()
        logits = self._forward(fwd)  # the mask worker fills meanwhile
        trace["forward_end"] = time.perf_counter()
        need_apply = self._wait_fill(fill) if fill is not None else []
        if fwd:
            if fill is not None:
                trace["fill_start"], trace["fill_end"] = fill_times["start"], fill_times["end"]
            self.step_trace.append(trace)
        row_of = {id(r): i for i, r in enumerate(fwd)}
        self._after_forward(fwd, logits, row_of)
        if sampling:
            batch = torch.stack([logits[row_of[id(r)]] if id(r) in row_of else r.stored_logits
                                 for r in sampling])  # (S, V)
            rows = [i for i, need in enumerate(need_apply) if need]
            if rows:
                apply_token_bitmask_inplace(batch, bitmask, indices=rows)
            for i, req in enumerate(sampling):
                req.stored_logits = None
                self._guard(req, self._sample_and_advance, req, batch[i])
        finished = [r for r in sched.running if r.is_finished]
        sched.remove(finished)
        return finished

    def _forward(self, fwd: list[Request]) -> torch.Tensor | None:
        """One forward pass over ``fwd``; the next-token logits ``(B, V)``
        (forced tokens' log-probabilities scored on the way)."""
        if not fwd:
            return None
        pending = [r.pending_ids for r in fwd]
        num_prompt = [max(0, len(r.prompt_ids) - r.num_cached) for r in fwd]  # prompt tokens still to feed
        prefilling = [r for r, n in zip(fwd, num_prompt) if n]
        self.stats.prefill_tokens += sum(num_prompt)
        num_logits = [max(rows_needed(len(r.prompt_ids), r.num_cached, r.output_ids, r.logprobs),
                          prompt_rows_needed(len(r.prompt_ids), len(r.output_ids), r.params.prompt_logprobs_start)
                          if r.needs_prompt_scoring else 1) for r in fwd]
        extra = any(k > 1 for k in num_logits) or any(r.needs_prompt_scoring for r in fwd)
        rows = (num_logits,) if extra else ()
        logits = self.model_runner.batch_forward([r.kv_cache for r in fwd], pending, num_prompt, *rows)  # (B|rows, V)
        if extra:  # rows past the next token's score forced output tokens and asked-for prompt tokens
            logits = score_batch(logits, fwd, num_logits)
        for req in fwd:
            req.num_forwards += 1
            req.num_cached = len(req.prompt_ids) + len(req.output_ids)
        if self.prefix_cache.enabled:
            for req in prefilling:  # the prompt's KV is complete now: remember it
                self.prefix_cache.insert(req.prompt_ids, req.kv_cache.keys, req.kv_cache.values)
        self.stats.forward_passes += 1
        self.stats.batched_sequences += len(fwd)
        return logits

    def _after_forward(self, fwd: list[Request], logits: torch.Tensor | None, row_of: dict) -> None:
        """After the forward pass: keep the logits of a request whose grammar
        still compiles, hand a prefilled prompt's KV to the samples waiting
        for it, finish a request that waited for its forced tokens'
        log-probabilities, and one that only prefills (``max_tokens=0``)."""
        if logits is None:
            return
        for req in fwd:
            if not req.grammar_ready:
                req.stored_logits = logits[row_of[id(req)]].clone()
        for req in self.scheduler.running:
            leader = req.leader
            if leader is not None and id(leader) in row_of and not req.is_finished and prompt_ready(leader):
                share_prompt(leader, req, None if leader.output_ids else logits[row_of[id(leader)]])
        for req in fwd:
            if req.deferred_finish is not None:
                self._finish(req, req.deferred_finish)
            elif not req.params.max_tokens and not req.is_finished:
                self._finish(req, FinishReason.LENGTH)

    def _reuse_prefix(self, req: Request) -> None:
        """Copy the KV of the longest cached prefix of ``req``'s prompt into
        its fresh cache (at least one prompt token is left to prefill: its
        logits are the first sample's; with ``prompt_logprobs``, every token
        from ``prompt_logprobs_start`` on: their rows score the prompt)."""
        limit = len(req.prompt_ids) - 1
        if req.params.prompt_logprobs is not None:
            limit = min(limit, req.params.prompt_logprobs_start)
        n = self.prefix_cache.copy_into(req.kv_cache, req.prompt_ids, limit)
        if not n:
            return
        req.num_cached = n
        req.num_prefix_cached = n
        self.stats.prefix_cache_hits += 1
        self.stats.prefix_cache_hit_tokens += n

    def _wait_fill(self, fill) -> list[bool]:
        start = time.perf_counter()
        need_apply, fill_ms = fill.result()
        self.stats.mask_steps += 1
        self.stats.mask_fill_ms += fill_ms
        self.stats.mask_wait_ms += (time.perf_counter() - start) * 1000.0
        return need_apply

    def _guard(self, req: Request, fn, *args) -> None:
        """Run ``fn(*args)``; an error (a bad grammar raises a LeapgenError;
        anything else is a bug, still confined to ``req``) fails ``req`` alone."""
        if req.is_finished:
            return
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - one request fails, the engine goes on
            self._finish(req, FinishReason.ERROR, exc)

    def _take_grammar(self, req: Request) -> None:
        """Once ``req``'s compile is done: its matcher, forced start text, and
        the check that a complete grammar leaves nothing to sample."""
        if req.deferred_finish is not None:
            return
        fut = req.compile_future
        if fut is not None and fut.done():
            req.compile_future = None
            compiled, req.compile_ms = fut.result()  # raises the compile's GrammarError
            if req.index == 0:  # (the samples of one request share its compile)
                self.stats.compiles += 1
                self.stats.compile_ms += req.compile_ms
                self.stats.compile_seconds.observe(req.compile_ms / 1000.0)
            req.matcher = self.grammar.new_matcher(compiled, req.stop_token_ids)
            if req.params.jump_forward:
                # Text forced from the very start (``{"id": ``) joins the prefill
                # (or the extend after it: the stored logits are then stale).
                if self._jump_forward(req):
                    req.stored_logits = None
                    if self._ended_after_jump(req):
                        return
        if req.matcher is not None and req.grammar_ready and req.matcher.is_completed():
            if not allows_non_stop(req.matcher, req.stop_token_ids, self.grammar.vocab_size):
                self._end(req, FinishReason.GRAMMAR)  # nothing left but EOS: save the forward
            elif len(req.output_ids) >= req.params.max_tokens:
                self._end(req, FinishReason.LENGTH)

    def _sample_and_advance(self, req: Request, logits: torch.Tensor) -> None:
        params = req.params
        scored = None
        if req.logprobs is not None:  # after the mask, before temperature and top-p (sample() scales in place)
            scored = logits if params.greedy else logits.clone()
        try:
            # a grammar rule's temperature (EBNF ``name[temperature=t]``) overrides the request's
            token = sample(logits, params, req.generator,
                           temperature=None if req.matcher is None else req.matcher.temperature)
        except ValueError:
            self._finish(req, FinishReason.ERROR, "the grammar admits no token here (dead end)")
            return
        if req.matcher is not None:
            try:
                accepted = req.matcher.accept_token(token)
            except StackDepthError as e:
                self._finish(req, FinishReason.ERROR, str(e))
                return
            if not accepted:
                self._finish(req, FinishReason.ERROR, f"the matcher rejected token {token} its own bitmask allowed")
                return
            if req.matcher.is_terminated():
                req.num_sampled += 1
                self._finish(req, FinishReason.STOP)
                return
        elif token in req.stop_token_ids:
            req.num_sampled += 1
            self._finish(req, FinishReason.STOP)
            return
        req.append_sampled(token, None if scored is None else entry_of(scored, token, params.logprobs, sampled=True))
        if self._hit_stop_string(req):
            return
        if len(req.output_ids) >= params.max_tokens:
            self._finish(req, FinishReason.LENGTH)
            return
        if params.max_reasoning_tokens is not None and not req.reasoning_done and self._bound_reasoning(req):
            if self._hit_stop_string(req):
                return
            if len(req.output_ids) >= params.max_tokens:
                self._end(req, FinishReason.LENGTH)
                return
        if params.jump_forward and req.matcher is not None and self._jump_forward(req):
            self._ended_after_jump(req)

    def _ended_after_jump(self, req: Request) -> bool:
        """After a jump-forward, end ``req`` where its forced text holds a stop string (cut there) or
        reaches ``max_tokens``; True if it ended."""
        if self._hit_stop_string(req):
            return True
        if len(req.output_ids) >= req.params.max_tokens:
            self._end(req, FinishReason.LENGTH)
            return True
        return False

    def _hit_stop_string(self, req: Request) -> bool:
        """Cut the output at the first stop string and finish; True if one hit."""
        if not req.params.stop:
            return False
        text = self.decode(req.output_ids)
        hits = [i for i in (text.find(s) for s in req.params.stop) if i >= 0]
        if not hits:
            return False
        req.text_end = min(hits)
        self._end(req, FinishReason.STOP)
        return True

    def _bound_reasoning(self, req: Request) -> bool:
        """``params.max_reasoning_tokens`` output tokens and no
        ``params.reasoning_end`` in the text: append it (forced, not
        sampled); once it is there, stop looking. True if it appended."""
        end = req.params.reasoning_end
        if end in self.decode(req.output_ids):
            req.reasoning_done = True
        elif len(req.output_ids) >= req.params.max_reasoning_tokens and self._jump_forward(req, end):
            req.reasoning_done = True  # (the matcher took it; else the next step tries again)
            return True
        return False

    def _jump_forward(self, req: Request, forced: str | None = None) -> bool:
        """Append the grammar's forced text (or ``forced``) to ``req``; True
        if its output changed."""
        token_bytes = self.grammar.token_text_bytes  # a structural tag's marker tokens included
        try:
            text = b"".join(token_bytes[t] for t in req.output_ids).decode("utf-8")
        except UnicodeDecodeError:
            return False  # the output ends inside a UTF-8 character: sample this step
        if req.matcher is None:  # (only ``forced``: an unconstrained request has nothing forced)
            new = self._encode(text + forced)[:req.params.max_tokens]
            common = common_prefix_length(req.output_ids, new)
            jump = JumpForward(forced, new, common) if len(new) > common else None
        else:
            jump = try_jump_forward(req.matcher, req.output_ids, text, self._encode,
                                    max_tokens=req.params.max_tokens, healing=self.grammar.healing,
                                    min_chars=self.jump_forward_min_chars, text=forced)
        if jump is None:
            return False
        before = req.sampled.count(False)
        keep = req.replace_output(jump.new_ids, jump.common_prefix)
        first_new = len(req.prompt_ids) + jump.common_prefix
        if req.logprobs is not None and keep >= first_new > 0:
            # Feed the token before the new ones again: its row in the extend pass scores the first new token.
            keep = req.num_cached = first_new - 1
        self.model_runner.crop(req.kv_cache, keep)
        if grammar_log.debug_enabled():
            forced = self.decode(jump.new_ids[jump.common_prefix:])
            grammar_log.logger.debug("Jump forward: request %d: %d tokens skipped (%r)", req.request_id,
                                     req.sampled.count(False) - before, forced[:80])
        return True

    def _end(self, req: Request, reason: str) -> None:
        """Finish ``req`` for ``reason``, or, when forced tokens still wait for
        the forward pass that scores their log-probabilities, after it."""
        if req.logprobs is not None and req.pending_ids and any(e is None for e in req.logprobs):
            req.deferred_finish = reason
        else:
            self._finish(req, reason)

    def _finish(self, req: Request, reason: str, error: BaseException | str | None = None) -> None:
        req.finish(reason, error)
        st = self.stats
        st.requests_finished[reason] += 1
        st.prompt_tokens += len(req.prompt_ids)
        st.completion_tokens += len(req.output_ids)
        st.jump_forward_tokens += req.sampled.count(False)

    # -------------------------------------------------------------- helpers

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids to text (special tokens kept, no clean-up)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))
