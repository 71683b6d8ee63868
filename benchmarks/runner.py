"""Worker side of ``bench_masks.py``: one backend, in its own forked process.

The worker builds the backend, warms it up on grammars outside the workload,
then for each grammar measures

- TTFM: compile + ``new_state`` + the first bitmask fill, in ms;
- TBM per token of each valid instance (MaskBench's method): fill the
  bitmask, check the instance's next token is allowed (not timed), accept it;
  TBM is the fill time plus the accept time, in ns;

and last the batch fill at several batch sizes. Results go to the parent
through a pipe, one message per grammar, so the parent can kill a worker
stuck in a compile and start another at the next grammar.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import time
from dataclasses import dataclass, field

COMPILE_LIMIT_S = 10.0
BATCH_SIZES = (1, 16, 64)
BATCH_REPEATS = 30


@dataclass
class Job:
    """What a worker runs (inherited through fork, never pickled).

    Attributes
    ----------
    backend : str
    grammars : list of workloads.Grammar
    tokens : list of list of list of int
        ``tokens[g][i]``: the token ids of instance ``i`` of grammar ``g``.
    warmup : list of (Grammar, list of list of int)
    tokenizer_info, hf_tokenizer
        The vocabulary, as leapgen and Hugging Face see it.
    strict : bool
        ``strict_mode`` for JSON Schemas.
    any_order : bool
        ``any_order`` for JSON Schemas (properties in any order; a backend
        without the option refuses every schema).
    backend_options : dict
    done : set of int
        Grammars with a result already (from an earlier worker of this job,
        or from the progress log of a resumed run): not run again.
    failed : set of int
        The grammars of ``done`` that failed.
    freeze : bool
        ``gc.freeze()`` after the warm-up, as ``leapgen serve`` does after its start-up.
    """

    backend: str
    grammars: list
    tokens: list
    warmup: list
    tokenizer_info: object
    hf_tokenizer: object
    strict: bool = True
    any_order: bool = False
    backend_options: dict = field(default_factory=dict)
    done: set = field(default_factory=set)
    failed: set = field(default_factory=set)
    freeze: bool = True


def _rss_mib(field_name: str = "VmRSS") -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def compile_grammar(backend, grammar, job: Job | None = None):
    """The backend's compiled handle for a workload grammar (JSON Schemas with the job's options;
    without a job, strict and in order, as ``bench_masks.py`` runs by default)."""
    if grammar.kind == "regex":
        return backend.compile_regex(grammar.source)
    if grammar.kind == "json_schema":
        return backend.compile_json_schema(grammar.source, any_whitespace=False,
                                           strict_mode=job.strict if job else True,
                                           any_order=job.any_order if job else False)
    if grammar.kind == "ebnf":
        return backend.compile_grammar(grammar.source)
    if grammar.kind == "choice":  # leapgen's trie; a peer gets the escaped alternation, as vLLM hands it over
        return backend.compile_choice(json.loads(grammar.source))
    return backend.compile_builtin_json()


def _allowed(bitmask, token_id: int) -> bool:
    return bool((int(bitmask[0, token_id >> 5]) >> (token_id & 31)) & 1)


def walk(backend, compiled, token_lists, stop_id: int, *, record_states: bool) -> dict:
    """Walk every instance; TBM per token and what the engine rejected.

    Returns
    -------
    dict
        ``tbm_ns``: list (per instance) of lists of int; ``first``: per
        instance, per step, 1 when the automaton state is visited for the first
        time in this grammar (only with ``record_states``, which reads
        leapgen's matcher state outside the timed region); ``rejected``:
        per instance None, ``"mask"`` (the filled bitmask forbade the next
        token) or ``"accept"``; ``end_ok``: per instance whether a stop token
        was allowed after the last token.
    """
    perf = time.perf_counter_ns
    bitmask = backend.allocate_bitmask(1)
    seen = set()
    out = {"tbm_ns": [], "first": [], "rejected": [], "end_ok": []}
    for ids in token_lists:
        state = backend.new_state(compiled)
        times, firsts, rejected = [], [], None
        for token in ids:
            if record_states:
                key = state.state
                firsts.append(int(key not in seen))
                seen.add(key)
            a = perf()
            state.fill_next_token_bitmask(bitmask, 0)
            b = perf()
            if not _allowed(bitmask, token):
                rejected = "mask"
                break
            c = perf()
            ok = state.accept_token(token)
            d = perf()
            if not ok:
                rejected = "accept"
                break
            times.append(b - a + d - c)
        end_ok = False
        if rejected is None:
            state.fill_next_token_bitmask(bitmask, 0)
            end_ok = _allowed(bitmask, stop_id)
        out["tbm_ns"].append(times)
        out["first"].append(firsts[:len(times)])
        out["rejected"].append(rejected)
        out["end_ok"].append(end_ok)
    return out


def _batch_states(backend, handles, n: int) -> list:
    """``n`` states, each advanced halfway through one of the instances."""
    states = []
    while len(states) < n and handles:
        for compiled, ids in handles:
            state = backend.new_state(compiled)
            for token in ids[:len(ids) // 2]:
                state.accept_token(token)
            states.append(state)
            if len(states) == n:
                break
    return states


def _time_fill(fill, reps: int) -> float:
    """Median µs of ``reps`` calls of ``fill()`` after one warm-up call."""
    fill()
    samples = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        fill()
        samples.append((time.perf_counter_ns() - t) / 1e3)
    return statistics.median(samples)


def batch_fill(backend, handles) -> dict:
    """Median µs per batch fill of states seen before: a plain loop and the
    backend's batch fill, per batch size."""
    out = {"loop": {}, "batch": {}}
    for size in BATCH_SIZES:
        states = _batch_states(backend, handles, size)
        if len(states) < size:
            continue
        bitmask = backend.allocate_bitmask(size)

        def loop():
            for i, s in enumerate(states):
                s.fill_next_token_bitmask(bitmask, i)

        out["loop"][size] = _time_fill(loop, BATCH_REPEATS)
        out["batch"][size] = _time_fill(lambda: backend.batch_fill_next_token_bitmask(states, bitmask),
                                        BATCH_REPEATS)
    return out


def leapgen_new_state_batch(job: Job, grammars, token_lists, size: int = 64, trials: int = 3) -> dict:
    """leapgen only: µs to fill a batch of ``size`` states never seen before
    (cold row caches: fresh compilers) with ``max_threads`` 1 and 2. Trials
    alternate; the median is reported."""
    from leapgen.backends import get_backend
    from leapgen.errors import GrammarError

    samples = {"max_threads=1": [], "max_threads=2": []}
    for _ in range(trials):
        for label, threads in (("max_threads=1", 1), ("max_threads=2", 2)):
            backend = get_backend("leapgen", job.tokenizer_info, max_threads=threads)
            handles = []
            for grammar, ids in zip(grammars, token_lists):
                try:
                    handles.append((compile_grammar(backend, grammar, job), ids[0]))
                except GrammarError:
                    continue
            states = _batch_states(backend, handles, size)
            bitmask = backend.allocate_bitmask(size)
            t = time.perf_counter_ns()
            backend.batch_fill_next_token_bitmask(states, bitmask)
            samples[label].append((time.perf_counter_ns() - t) / 1e3)
    return {label: statistics.median(v) for label, v in samples.items()}


class GcPauses:
    """The collector's pauses (``gc.callbacks``), each tagged with what ran:
    ``"walk"`` (the timed mask steps of :func:`walk`) or ``"other"``."""

    def __init__(self):
        self.phase = "other"
        self.pauses: list[tuple[float, int, str]] = []  # (ms, generation, phase)
        self._start = 0.0

    def __call__(self, event: str, info: dict) -> None:
        if event == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append(((time.perf_counter() - self._start) * 1e3, info["generation"], self.phase))


def worker_main(job: Job, conn) -> None:
    """Run ``job``'s grammars not in ``job.done``; report through ``conn``.

    Messages: ``("init", dict)``, ``("begin", g)``, ``("compiled", g)``,
    ``("grammar", g, dict)``, ``("batch", dict)``, ``("done", dict)``. A
    grammar's dict holds :func:`walk`'s result, ``ttfm_ms``, the collector's
    pauses over 1 ms during its walk (``gc_ms``) and, for leapgen, whether
    the grammar compiled to one DFA (``regular``) and whether that DFA counts
    string lengths at run time (``counted``, a ``CountedGrammar``).
    """
    import gc

    from leapgen.backends import get_backend
    from leapgen.errors import GrammarError

    rss_start = _rss_mib()
    t = time.perf_counter()
    backend = get_backend(job.backend, job.tokenizer_info, hf_tokenizer=job.hf_tokenizer, **job.backend_options)
    conn.send(("init", {"init_s": time.perf_counter() - t, "rss_start_mib": rss_start,
                        "rss_init_mib": _rss_mib()}))
    stop_id = job.tokenizer_info.stop_token_ids[0]
    record_states = job.backend == "leapgen"
    for grammar, token_lists in job.warmup:
        walk(backend, compile_grammar(backend, grammar, job), token_lists, stop_id, record_states=False)
    if job.freeze:  # as leapgen serve does after its start-up: the imports' ~300k objects out of full collections
        gc.collect()
        gc.freeze()
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    handles = []  # (compiled, token ids) of the fixed grammars, for the batch fill
    for g in range(len(job.grammars)):
        if g in job.done:
            continue
        grammar = job.grammars[g]
        conn.send(("begin", g))
        bitmask = backend.allocate_bitmask(1)
        t = time.perf_counter()
        try:
            compiled = compile_grammar(backend, grammar, job)
            backend.new_state(compiled).fill_next_token_bitmask(bitmask, 0)
        except GrammarError as e:
            conn.send(("grammar", g, {"error": f"{type(e).__name__}: {e}"[:300]}))
            continue
        except Exception as e:  # a peer crashing on a grammar is a failure of that grammar only
            conn.send(("grammar", g, {"error": f"crash {type(e).__name__}: {e}"[:300]}))
            continue
        ttfm_ms = (time.perf_counter() - t) * 1e3
        conn.send(("compiled", g))
        if ttfm_ms > COMPILE_LIMIT_S * 1e3:
            conn.send(("grammar", g, {"error": f"timeout: compiled in {ttfm_ms / 1e3:.1f} s", "ttfm_ms": ttfm_ms}))
            continue
        first_pause = len(pauses.pauses)
        pauses.phase = "walk"
        result = walk(backend, compiled, job.tokens[g], stop_id, record_states=record_states)
        pauses.phase = "other"
        result["ttfm_ms"] = ttfm_ms
        result["gc_ms"] = [round(ms, 2) for ms, _, _ in pauses.pauses[first_pause:] if ms > 1.0]
        if record_states:
            counted = hasattr(compiled, "row_key")  # leapgen's CountedGrammar: one DFA, (state, count) pairs
            result["regular"] = bool(compiled.is_regular) or counted
            result["counted"] = counted
        conn.send(("grammar", g, result))
        if grammar.group in ("regex", "schema"):
            handles += [(compiled, ids) for ids, r in zip(job.tokens[g], result["rejected"]) if r is None]
    for g in sorted(job.done):  # walked before (another worker, an earlier run): recompile the fixed ones that worked
        if job.grammars[g].group in ("regex", "schema") and g not in job.failed:
            compiled = compile_grammar(backend, job.grammars[g], job)
            handles += [(compiled, ids) for ids in job.tokens[g]]
    gc.callbacks.remove(pauses)
    conn.send(("batch", batch_fill(backend, handles)))
    if record_states:
        fixed = [(g, t) for g, t in zip(job.grammars, job.tokens) if g.group in ("regex", "schema")]
        conn.send(("batch_new", leapgen_new_state_batch(job, [g for g, _ in fixed], [t for _, t in fixed])))
    walk_pauses = [ms for ms, _, phase in pauses.pauses if phase == "walk"]
    conn.send(("done", {"rss_peak_mib": _rss_mib("VmHWM"), "pid": os.getpid(),
                        "gc": {"collections": len(pauses.pauses), "walk_collections": len(walk_pauses),
                               "over_10ms": sum(ms > 10 for ms, _, _ in pauses.pauses),
                               "walk_over_10ms": sum(ms > 10 for ms in walk_pauses),
                               "total_ms": sum(ms for ms, _, _ in pauses.pauses)}}))
