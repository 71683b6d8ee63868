"""Test-only spy, loaded as ``sitecustomize`` (through PYTHONPATH) in every process a vLLM test starts.

When ``LEAPGEN_ENGINE_SPY_DIR`` is set, it records in ``<dir>/<pid>.log``: each
structured-output backend class vLLM builds (``built <class>``) and each bitmask
row leapgen's grammar fills (``fill leapgen``). The classes are wrapped when their
modules are first imported (an import hook), so nothing is imported early: the
tests read the files to prove which backend produced the masks in the engine's
own processes.
"""

import importlib.abc
import importlib.machinery
import os
import sys

_DIR = os.environ.get("LEAPGEN_ENGINE_SPY_DIR")


def _record(line):
    with open(os.path.join(_DIR, f"{os.getpid()}.log"), "a") as f:
        f.write(line + "\n")


def _spy_init(cls):
    original = cls.__init__

    def __init__(self, *args, **kwargs):
        _record(f"built {cls.__name__}")
        original(self, *args, **kwargs)

    cls.__init__ = __init__


def _spy_leapgen(module):
    _spy_init(module.LeapgenBackend)
    original = module.LeapgenGrammar.fill_bitmask

    def fill_bitmask(self, bitmask, batch_index):
        _record("fill leapgen")
        return original(self, bitmask, batch_index)

    module.LeapgenGrammar.fill_bitmask = fill_bitmask


_HOOKS = {
    "leapgen.integrations.vllm_backend": _spy_leapgen,
    "vllm.v1.structured_output.backend_xgrammar": lambda m: _spy_init(m.XgrammarBackend),
    "vllm.v1.structured_output.backend_guidance": lambda m: _spy_init(m.GuidanceBackend),
    "vllm.v1.structured_output.backend_outlines": lambda m: _spy_init(m.OutlinesBackend),
    "vllm.v1.structured_output.backend_lm_format_enforcer": lambda m: _spy_init(m.LMFormatEnforcerBackend),
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        hook = _HOOKS.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_spy(module):
            exec_module(module)
            hook(module)

        spec.loader.exec_module = exec_and_spy
        return spec


if _DIR:
    sys.meta_path.insert(0, _Finder())
