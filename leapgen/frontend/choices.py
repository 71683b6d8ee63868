"""How ``select`` picks one of its choices: SGLang's three methods
(``sglang/lang/choices.py``), and leapgen's constrained-decoding one.

SGLang scores every choice and picks the best; it never generates free text.
For each choice ``c`` the backend computes the log-probabilities of the tokens
of ``prompt + c`` after the prompt (the first token that differs from the
prompt's own tokenization on, so a boundary token that merges prompt and
choice is scored too: SGLang's "token healing"). Then:

- :data:`token_length_normalized` (the default): the highest mean
  log-probability per token;
- :data:`greedy_token_selection`: token by token, keep the choices whose
  log-probability at that position is the highest (a shorter choice is padded
  with its own mean), until one is left;
- :data:`unconditional_likelihood_normalized`: the highest mean of
  ``logprob(token | prompt) - logprob(token | nothing)``.

:data:`constrained_decoding` (leapgen's) instead decodes greedily under a
grammar that admits exactly the choices (an alternation of the escaped
literals): one generation request, no log-probabilities needed (any backend,
any server), but a token-by-token greedy choice, not the best mean
log-probability: with choices ``"dogs"`` and ``"cat"``, a first token ``"d"``
that is likelier than ``"cat"`` commits to ``"dogs"`` however unlikely the
rest is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ChoicesDecision:
    """The chosen text and what it was chosen from."""

    decision: str
    meta_info: dict | None = None


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("-inf")


def _argmax_first(values) -> int:
    return max(range(len(values)), key=values.__getitem__)


class ChoicesSamplingMethod:
    """A rule that picks a choice from per-token log-probabilities.

    ``input_token_logprobs[i]`` lists ``(logprob, token_id, token_text)`` for
    the scored tokens of choice ``i``; ``normalized_prompt_logprobs[i]`` is
    their mean.
    """

    requires_unconditional_logprobs = False
    requires_logprobs = True

    def __call__(self, *, choices, normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs,
                 unconditional_token_logprobs=None) -> ChoicesDecision:
        raise NotImplementedError

    def _meta(self, normalized, inputs, outputs, **extra) -> dict:
        return {"normalized_prompt_logprobs": normalized, "input_token_logprobs": inputs,
                "output_token_logprobs": outputs, **extra}


class TokenLengthNormalized(ChoicesSamplingMethod):
    """The choice with the highest mean log-probability per token (SGLang's default)."""

    def __call__(self, *, choices, normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs,
                 unconditional_token_logprobs=None) -> ChoicesDecision:
        best = choices[_argmax_first(normalized_prompt_logprobs)]
        return ChoicesDecision(best, self._meta(normalized_prompt_logprobs, input_token_logprobs,
                                                output_token_logprobs))


class GreedyTokenSelection(ChoicesSamplingMethod):
    """Token by token, the choices with the highest log-probability at that position survive
    (a shorter choice continues with its own mean), until one is left."""

    def __call__(self, *, choices, normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs,
                 unconditional_token_logprobs=None) -> ChoicesDecision:
        width = max(len(tokens) for tokens in input_token_logprobs)
        matrix = []
        for tokens in input_token_logprobs:
            row = [t[0] for t in tokens]
            matrix.append(row + [_mean(row) if row else float("nan")] * (width - len(row)))
        remaining = list(range(len(choices)))
        for j in range(width):
            top = max(matrix[i][j] for i in remaining)
            remaining = [i for i in remaining if matrix[i][j] == top]
            if len(remaining) == 1:
                break
        return ChoicesDecision(choices[remaining[0]], self._meta(
            normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs, greedy_logprob_matrix=matrix))


class UnconditionalLikelihoodNormalized(ChoicesSamplingMethod):
    """The highest mean of ``logprob(token | prompt) - logprob(token | no prompt)``."""

    requires_unconditional_logprobs = True

    def __call__(self, *, choices, normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs,
                 unconditional_token_logprobs=None) -> ChoicesDecision:
        if unconditional_token_logprobs is None:
            raise ValueError("unconditional_likelihood_normalized needs the unconditional token logprobs")
        scores = []
        for given, alone in zip(input_token_logprobs, unconditional_token_logprobs):
            a = [t[0] for t in alone]
            a[0] = a[0] or 0.0  # the first token has no context: no logprob
            scores.append(_mean(g[0] - u for g, u in zip(given, a)))
        return ChoicesDecision(choices[_argmax_first(scores)], self._meta(
            normalized_prompt_logprobs, input_token_logprobs, output_token_logprobs,
            unconditional_token_logprobs=unconditional_token_logprobs,
            normalized_unconditional_prompt_logprobs=scores))


class ConstrainedDecoding(ChoicesSamplingMethod):
    """leapgen's: greedy decoding under a grammar of exactly the choices (see the module docstring)."""

    requires_logprobs = False

    def __call__(self, **kwargs) -> ChoicesDecision:  # the backend generates instead of scoring
        raise TypeError("constrained_decoding is carried out by the backend, not called on logprobs")


token_length_normalized = TokenLengthNormalized()
greedy_token_selection = GreedyTokenSelection()
unconditional_likelihood_normalized = UnconditionalLikelihoodNormalized()
constrained_decoding = ConstrainedDecoding()


def choices_regex(choices: list[str]) -> str:
    """An ECMAScript regex (leapgen's dialect) matching exactly one of ``choices``."""
    special = set("^$\\.*+?()[]{}|/")
    escaped = ["".join("\\" + ch if ch in special else ch for ch in c) for c in choices]
    return "|".join(f"(?:{e})" for e in escaped)


def check_choices(choices: Any) -> list[str]:
    """``choices`` as a list of distinct non-empty strings.

    Raises
    ------
    ValueError
        Not a non-empty list of strings.
    """
    if isinstance(choices, str) or not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError("select needs choices: a non-empty list of strings")
    if not all(isinstance(c, str) for c in choices):
        raise ValueError("select's choices must all be strings")
    return list(choices)
