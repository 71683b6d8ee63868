"""The generation engine: model loading, continuous batching with grammar
masks, and jump-forward.

Public API: :class:`LLM` (continuous batching), :class:`AsyncLLM` (the engine
loop in a thread, for servers), :class:`SamplingParams`, :class:`RequestOutput`,
:class:`FinishReason`, :func:`load_model`. Names are imported on first use, so
``leapgen.engine.sampling_params`` (or the CLI's argument checks) does not
pull in torch and transformers.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "LLM": "leapgen.engine.llm_engine",
    "AsyncLLM": "leapgen.engine.async_llm",
    "Scheduler": "leapgen.engine.scheduler",
    "EngineStats": "leapgen.engine.stats",
    "SamplingParams": "leapgen.engine.sampling_params",
    "RequestOutput": "leapgen.engine.request",
    "FinishReason": "leapgen.engine.request",
    "load_model": "leapgen.engine.model_loader",
    "default_model_folder": "leapgen.engine.model_loader",
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
