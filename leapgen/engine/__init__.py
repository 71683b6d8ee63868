"""The generation engine: model loading, the decoding loop with grammar
masks, and jump-forward.

Public API: :class:`LLM`, :class:`SamplingParams`, :class:`RequestOutput`,
:class:`FinishReason`, :func:`load_model`. Names are imported on first use, so
``leapgen.engine.sampling_params`` (or the CLI's argument checks) does not
pull in torch and transformers.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "LLM": "leapgen.engine.llm_engine",
    "SamplingParams": "leapgen.engine.sampling_params",
    "RequestOutput": "leapgen.engine.request",
    "FinishReason": "leapgen.engine.request",
    "load_model": "leapgen.engine.model_loader",
    "LoadedModel": "leapgen.engine.model_loader",
    "ModelLoadError": "leapgen.engine.model_loader",
    "DEFAULT_MODEL": "leapgen.engine.model_loader",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leapgen.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
