"""Process-wide frontend settings (SGLang's ``global_config``): the default backend."""

from __future__ import annotations


class GlobalConfig:
    """``default_backend``: used by ``run``/``run_batch`` when no ``backend=`` is given; None
    until set (then the embedded engine is created on first use)."""

    def __init__(self):
        self.default_backend = None
        # SGLang's output tokenization settings, sent by RuntimeEndpoint as SGLang sends them.
        self.skip_special_tokens_in_output = True
        self.spaces_between_special_tokens_in_out = True


global_config = GlobalConfig()
