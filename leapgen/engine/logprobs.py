"""Token log-probabilities: :class:`TokenLogprob` and how the engine scores
sampled and forced output tokens, and prompt tokens.

One responsibility: turn logits rows into per-token entries. What is
reported, for each output token (the stop token excluded):

- **a sampled token**: ``log_softmax`` of the logits it was sampled from
  *after the grammar mask and before temperature, top-k and top-p* (what vLLM
  reports by default, its ``raw_logprobs`` mode, where the structured-output
  bitmask is applied before the sampler). Tokens the grammar forbids have
  probability 0 there, so ``top`` lists only tokens the grammar allows (fewer
  than asked when fewer are allowed).
- **a forced (jump-forward) token**: it was never sampled, and no mask was
  computed at its position; its entry is the model's own ``log_softmax``,
  unmasked and at temperature 1, of the logits *from the extend pass that fed
  it* (the forward pass that appended the forced text computes every fed
  position's logits; the engine feeds the token before a retokenized span
  again so that its first token is scored in that pass too). ``top`` comes
  from the same unmasked row. ``sampled`` tells the two apart.

When a jump-forward retokenizes the end of the output, the entries of the
replaced tokens are dropped with them and the new tokens are scored by the
extend pass. A request that would finish right after a jump-forward (the
grammar complete, ``max_tokens`` reached) first runs that extend pass to score
its forced tokens.

**Prompt tokens** (``SamplingParams.prompt_logprobs``; vLLM's
``prompt_logprobs``, SGLang's ``input_token_logprobs``): the model's own
``log_softmax`` at temperature 1 of each prompt token given the tokens before
it, from the rows of the pass that prefills the prompt (teacher forcing);
see :func:`score_prompt`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class TokenLogprob:
    """One output token's log-probability.

    Attributes
    ----------
    token_id : int
    logprob : float
        Natural log; ``-inf`` cannot occur for a token the engine emitted.
    top : tuple of (int, float)
        The most likely tokens at that position and their log-probabilities,
        most likely first (as many as ``SamplingParams.logprobs`` asked, or
        fewer when fewer have a non-zero probability).
    sampled : bool
        True when the sampler chose the token (masked row), False when a
        jump-forward put it there (unmasked row; see the module docstring).
    """

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...]
    sampled: bool


def entry_of(logits: torch.Tensor, token_id: int, num_top: int, *, sampled: bool) -> TokenLogprob:
    """The entry of ``token_id`` scored by one logits row.

    Parameters
    ----------
    logits : torch.Tensor
        float32, ``(vocab_size,)``; ``-inf`` where masked. Not mutated.
    token_id : int
    num_top : int
        How many alternatives to list (>= 0).
    sampled : bool

    Returns
    -------
    TokenLogprob
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    top: tuple[tuple[int, float], ...] = ()
    if num_top:
        values, ids = torch.topk(logp, min(num_top, logp.numel()))
        top = tuple((int(i), float(v)) for v, i in zip(values.tolist(), ids.tolist()) if v != float("-inf"))
    return TokenLogprob(int(token_id), float(logp[token_id]), top, sampled)


def rows_needed(num_prompt: int, num_cached: int, output_ids: Sequence[int],
                entries: Sequence[TokenLogprob | None] | None) -> int:
    """How many trailing positions of a sequence's next forward pass need
    their logits: 1 (the next token's), or enough to score every output token
    that has no entry yet (a forced token at output index ``j`` is scored by
    the logits of position ``num_prompt + j - 1``).

    Parameters
    ----------
    num_prompt : int
    num_cached : int
        Tokens already in the KV cache (the forward feeds the rest).
    output_ids : sequence of int
    entries : sequence of TokenLogprob or None, or None
        Per output token; None where not yet scored. None: logprobs off.

    Returns
    -------
    int
        In ``[1, tokens fed]``.
    """
    fed = num_prompt + len(output_ids) - num_cached
    if entries is None:
        return 1
    first = next((j for j, e in enumerate(entries) if e is None), None)
    if first is None:
        return 1
    offset = num_prompt + first - 1 - num_cached  # row of the first position to read, in the fed block
    return max(1, min(fed, fed - max(offset, 0)))


def prompt_rows_needed(num_prompt: int, num_output: int, start: int) -> int:
    """How many trailing positions of the pass that feeds the prompt score it
    from position ``start`` on: every position from ``start`` to the last fed
    one (the engine keeps ``start`` and later positions out of the prefix
    cache, so they are all fed).

    Parameters
    ----------
    num_prompt : int
    num_output : int
        Output tokens fed with the prompt (text forced before the prefill).
    start : int
        ``SamplingParams.prompt_logprobs_start`` (< ``num_prompt``).

    Returns
    -------
    int
        ``num_prompt + num_output - start``.
    """
    return num_prompt + num_output - start


def score_prompt(rows: torch.Tensor, prompt_ids: Sequence[int], num_output: int, start: int,
                 num_top: int) -> tuple[TokenLogprob | None, ...]:
    """The prompt entries of positions ``start`` .. end from the rows of the
    pass that fed them: the entry of position ``j > start`` is
    ``log_softmax(rows at position j - 1)[prompt_ids[j]]``; position
    ``start``'s is None (no row before it was computed: SGLang's convention,
    and vLLM's for position 0).

    Parameters
    ----------
    rows : torch.Tensor
        float32, ``(k, vocab_size)``: the logits of the last ``k`` fed
        positions, ``k >= prompt_rows_needed(...)``; unmasked. Not mutated.
    prompt_ids : sequence of int
    num_output : int
        Output tokens fed after the prompt in that pass.
    start : int
    num_top : int
        Alternatives per entry.

    Returns
    -------
    tuple of (TokenLogprob or None)
        ``len(prompt_ids) - start`` entries; ``sampled`` is False.
    """
    first_row_pos = len(prompt_ids) + num_output - rows.shape[0]  # absolute position of rows[0]
    if start < first_row_pos:
        raise ValueError(f"the rows start at position {first_row_pos}, after the first one scored ({start})")
    targets = [int(t) for t in prompt_ids[start + 1 :]]
    if not targets:
        return (None,)
    # Positions start .. n-2 score the tokens start+1 .. n-1.
    logp = torch.log_softmax(rows[start - first_row_pos : len(prompt_ids) - 1 - first_row_pos].float(), dim=-1)
    values = logp.gather(1, torch.tensor(targets, device=logp.device)[:, None])[:, 0].tolist()
    tops: list = [()] * len(targets)
    if num_top:
        top_values, top_ids = torch.topk(logp, min(num_top, logp.shape[1]), dim=-1)
        tops = [tuple(zip(i, v)) for i, v in zip(top_ids.tolist(), top_values.tolist())]
    return (None, *(TokenLogprob(t, v, top, False) for t, v, top in zip(targets, values, tops)))


def score_forced(rows: torch.Tensor, num_prompt: int, output_ids: Sequence[int],
                 entries: list, num_top: int) -> None:
    """Fill the missing entries of forced tokens from the rows of the forward
    pass that fed them (mutates ``entries``).

    Parameters
    ----------
    rows : torch.Tensor
        float32, ``(k, vocab_size)``: the logits of the last ``k`` fed
        positions (``k`` from :func:`rows_needed`), unmasked.
    num_prompt : int
    output_ids : sequence of int
    entries : list of TokenLogprob or None
    num_top : int
    """
    total = num_prompt + len(output_ids)
    first_row_pos = total - rows.shape[0]  # absolute position of rows[0]
    for j, e in enumerate(entries):
        if e is not None:
            continue
        pos = num_prompt + j - 1
        if first_row_pos <= pos < total:
            entries[j] = entry_of(rows[pos - first_row_pos], output_ids[j], num_top, sampled=False)


def score_batch(logits: torch.Tensor, requests: Sequence, num_logits: Sequence[int]) -> torch.Tensor:
    """Score every request's forced tokens, and the prompt of a request that
    asked for ``prompt_logprobs``, from its rows of a forward pass (mutates
    their ``logprobs`` / ``prompt_logprobs``) and return the next-token rows.

    Parameters
    ----------
    logits : torch.Tensor
        float32 ``(sum(num_logits), vocab_size)``: each request's last
        ``num_logits[i]`` fed positions, in order (``ModelRunner.batch_forward``).
    requests : sequence of Request
        Fed by that pass, in its order; their ``output_ids`` as fed.
    num_logits : sequence of int
        From :func:`rows_needed`.

    Returns
    -------
    torch.Tensor
        ``(len(requests), vocab_size)``: each request's last row.
    """
    ends = torch.tensor(list(num_logits)).cumsum(0)
    for req, k, end in zip(requests, num_logits, ends.tolist()):
        if k > 1 and req.logprobs is not None:
            score_forced(logits[end - k : end], len(req.prompt_ids), req.output_ids, req.logprobs,
                         req.params.logprobs)
        if req.needs_prompt_scoring:
            req.prompt_logprobs = score_prompt(logits[end - k : end], req.prompt_ids, len(req.output_ids),
                                               req.params.prompt_logprobs_start, req.params.prompt_logprobs)
    return logits[ends - 1]


def output_entries(entries: Sequence[TokenLogprob | None], token_bytes: Sequence[bytes], text: str,
                   text_end: int | None) -> tuple[TokenLogprob, ...]:
    """A request's entries as its output reports them: the scored ones, and
    when a stop string cut the text at character ``text_end``, only those of
    tokens that start before the cut."""
    scored = [e for e in entries if e is not None]
    if text_end is None:
        return tuple(scored)
    limit = len(text[:text_end].encode("utf-8", "surrogatepass"))
    out, offset = [], 0
    for e in scored:
        if offset >= limit:
            break
        out.append(e)
        offset += len(token_bytes[e.token_id])
    return tuple(out)
