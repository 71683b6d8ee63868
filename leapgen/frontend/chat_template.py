"""Chat templates as the frontend uses them: a prefix and a suffix per role
(SGLang's ``ChatTemplate``), taken from a model's own Jinja template or from a
small registry of SGLang's for the HTTP backend."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ChatTemplate:
    """Role markup.

    Attributes
    ----------
    name : str
    default_system_prompt : str or None
        Inserted as a system message when a program's first role is not ``system``.
    role_prefix_and_suffix : dict of str to (str, str)
    stop_str : tuple of str
        Stop strings every ``gen`` gets (the end-of-turn marker).
    """

    name: str
    default_system_prompt: str | None
    role_prefix_and_suffix: dict
    stop_str: tuple = ()

    def get_prefix_and_suffix(self, role: str) -> tuple[str, str]:
        return self.role_prefix_and_suffix.get(role, ("", ""))


_CHATML = {r: (f"<|im_start|>{r}\n", "<|im_end|>\n") for r in ("system", "user", "assistant")}
REGISTRY = {
    "default": ChatTemplate("default", None, {"system": ("SYSTEM:", "\n"), "user": ("USER:", "\n"),
                                              "assistant": ("ASSISTANT:", "\n")}),
    "chatml": ChatTemplate("chatml", None, _CHATML, ("<|im_end|>",)),
    "qwen": ChatTemplate("qwen", "You are a helpful assistant.", _CHATML, ("<|im_end|>",)),
    "llama-3-instruct": ChatTemplate("llama-3-instruct", None, {
        r: (f"<|start_header_id|>{r}<|end_header_id|>\n\n", "<|eot_id|>") for r in ("system", "user", "assistant")},
        ("<|eot_id|>",)),
}
_MATCHERS = [(r"llama-3.*instruct", "llama-3-instruct"), (r"qwen.*(chat|instruct)", "qwen"),
             (r"smollm|tinyllama|chatml", "chatml")]


def get_chat_template(name: str) -> ChatTemplate:
    """A registered template by name (``default``, ``chatml``, ``qwen``, ``llama-3-instruct``).

    Raises
    ------
    ValueError
        Unknown name.
    """
    if name not in REGISTRY:
        raise ValueError(f"unknown chat template {name!r}; known: {sorted(REGISTRY)}")
    return REGISTRY[name]


def get_chat_template_by_model_path(model_path: str) -> ChatTemplate:
    """The template SGLang's matching rules pick for a model path (``default`` when none matches)."""
    for pattern, name in _MATCHERS:
        if re.search(pattern, model_path or "", re.IGNORECASE):
            return REGISTRY[name]
    return REGISTRY["default"]


def chat_template_from_tokenizer(tokenizer) -> ChatTemplate:
    """The role prefixes and suffixes of a Hugging Face tokenizer's chat template, read by
    rendering conversations with sentinel contents (so a template's default system prompt,
    e.g. SmolLM2's, is found too). Falls back to SGLang's ``default`` template when the
    tokenizer has no template or it cannot render a system message."""
    if not getattr(tokenizer, "chat_template", None):
        return REGISTRY["default"]
    a, b = "\ue000", "\ue001"  # private-use sentinels

    def render(messages):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)

    try:
        sys_only = render([{"role": "system", "content": a}])
        sys_prefix, sys_suffix = sys_only.split(a)
        roles = {"system": (sys_prefix, sys_suffix)}
        for role in ("user", "assistant"):
            text = render([{"role": "system", "content": a}, {"role": role, "content": b}])
            if not text.startswith(sys_only):
                return REGISTRY["default"]
            prefix, suffix = text[len(sys_only):].split(b)
            roles[role] = (prefix, suffix)
        alone = render([{"role": "user", "content": b}])
    except Exception:  # a template that refuses these conversations (no system role, strict alternation)
        return REGISTRY["default"]
    default_system = None
    head = alone[:alone.find(roles["user"][0] + b)]
    if head.startswith(sys_prefix) and head.endswith(sys_suffix) and len(head) > len(sys_prefix + sys_suffix):
        default_system = head[len(sys_prefix):len(head) - len(sys_suffix)]
    end = roles["assistant"][1].strip()
    name = getattr(tokenizer, "name_or_path", "") or "model"
    return ChatTemplate(f"hf:{name}", default_system, roles, (end,) if end else ())
