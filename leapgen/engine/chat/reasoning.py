"""Reasoning parsers: where a reasoning model's thinking is, before its answer.

One responsibility: the registry of :class:`ReasoningParser` descriptions
(``--reasoning-parser``), each the ``<think>...</think>`` convention of a
model family, and what follows from one: whether a rendered prompt leaves
the model inside a think block, outside one, or past one (:meth:`state_of`),
the structural-tag prefix that lets the thinking be free and puts the
grammar after its end (:meth:`prefix_format`), and how a prompt is closed
when ``enable_thinking`` is false and the template did not do it.

- ``qwen3``: the model opens ``<think>`` itself (Qwen3's template adds the
  empty block ``<think>\\n\\n</think>\\n\\n`` to the prompt when
  ``enable_thinking`` is false) and writes ``\\n\\n`` after ``</think>``.
- ``deepseek_r1``: DeepSeek-R1's template opens the block in the prompt
  (``<think>\\n``); a model that writes ``<think>`` again may.

The names and conventions are vLLM's and SGLang's reasoning parsers'; the
grammar is xgrammar's builtin reasoning prefix (``_build_reasoning_prefix``).
Markers that are single added tokens (Qwen3's ``<think>`` = 151667,
``</think>`` = 151668) match as that token (structural tags' markers).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where a prompt leaves the model (:meth:`ReasoningParser.state_of`).
INSIDE, FRESH, DONE = "inside", "fresh", "done"


@dataclass(frozen=True)
class ReasoningParser:
    """One family's thinking convention.

    Attributes
    ----------
    name : str
    start, end : str
        The markers around the thinking.
    suffix : str
        What the model writes after ``end`` (forced by the grammar).
    start_optional : bool
        Without a block opened in the prompt, the output may start with the
        thinking itself (``start`` optional); else it starts with ``start``.
    """

    name: str
    start: str = "<think>"
    end: str = "</think>"
    suffix: str = ""
    start_optional: bool = False

    def state_of(self, prompt_text: str) -> str:
        """Where ``prompt_text`` leaves the model: :data:`INSIDE` a block
        (it ends with ``start``, as DeepSeek-R1's template does),
        :data:`DONE` (it ends with ``end``: thinking disabled) or
        :data:`FRESH` (the model may open one). Trailing whitespace does not count."""
        text = prompt_text.rstrip()
        if text.endswith(self.start):
            return INSIDE
        if text.endswith(self.end):
            return DONE
        return FRESH

    def closing_text(self, state: str) -> str:
        """What to append to a prompt in ``state`` so that thinking is done
        (``enable_thinking: false`` where the template did not close it)."""
        if state == INSIDE:
            return "\n" + self.end + "\n\n"
        if state == FRESH:
            return self.start + "\n\n" + self.end + "\n\n"
        return ""

    def prefix_format(self, state: str) -> dict | None:
        """The structural-tag format of the thinking in ``state`` (None when
        :data:`DONE`): any text up to ``end`` (which it cannot hold), then
        ``end`` and ``suffix``."""
        if state == DONE:
            return None
        begin = self.start if state == FRESH and not self.start_optional else ""
        elements: list[dict] = [{"type": "tag", "begin": begin, "content": {"type": "any_text"}, "end": self.end}]
        if state == FRESH and self.start_optional:
            elements.insert(0, {"type": "optional", "content": {"type": "const_string", "value": self.start}})
        if self.suffix:
            elements.append({"type": "const_string", "value": self.suffix})
        return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}

REASONING_PARSERS: dict[str, ReasoningParser] = {
    "qwen3": ReasoningParser("qwen3", suffix="\n\n"),
    "deepseek_r1": ReasoningParser("deepseek_r1", start_optional=True),
}


def get_reasoning_parser(name: str) -> ReasoningParser:
    """The registered parser called ``name``.

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones).
    """
    try:
        return REASONING_PARSERS[name]
    except KeyError:
        raise ValueError(f"unknown reasoning parser {name!r}; known: {', '.join(sorted(REASONING_PARSERS))}") \
            from None
