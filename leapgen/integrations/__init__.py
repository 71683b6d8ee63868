"""leapgen inside other engines: one module per engine, each importing its engine lazily.

* :mod:`leapgen.integrations.vllm`: vLLM's structured-output backend
  ``"leapgen"`` (a ``vllm.general_plugins`` entry point), with jump-forward as
  speculative drafts (:mod:`leapgen.integrations.vllm_jump_forward`).
* :mod:`leapgen.integrations.sglang`: SGLang's grammar backend ``"leapgen"``
  (a ``sglang.srt.plugins`` entry point).

Nothing here is imported by ``import leapgen``.
"""

BACKEND_NAME = "leapgen"
"""leapgen's name as a backend in vLLM (``structured_outputs_config.backend``) and in SGLang
(``--grammar-backend``)."""
