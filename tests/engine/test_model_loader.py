"""Model loading and the converted-model cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leapgen.engine.model_loader import (
    ModelLoadError,
    configure_threads,
    default_cache_dir,
    default_num_threads,
    find_default_gguf,
    load_model,
)


def test_default_cache_dir_follows_leapgen_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("LEAPGEN_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("LEAPGEN_CACHE")
    assert default_cache_dir() == Path("~/.cache/leapgen/models").expanduser()


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="neither 'default' nor a local"):
        load_model(str(tmp_path / "nowhere"))


def test_configure_threads(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        assert configure_threads(1) == 1
        monkeypatch.setenv("LEAPGEN_NUM_THREADS", "1")
        assert configure_threads() == 1
        monkeypatch.setenv("LEAPGEN_NUM_THREADS", "many")
        with pytest.raises(ValueError):
            configure_threads()
        with pytest.raises(ValueError):
            configure_threads(0)
        monkeypatch.delenv("LEAPGEN_NUM_THREADS")
        assert 1 <= configure_threads() <= (os.cpu_count() or 1)
        assert 1 <= default_num_threads() <= (os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)


@pytest.mark.model
def test_default_model_is_cached_as_a_plain_folder(loaded_model):
    folder = Path(loaded_model.path)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "leapgen_source.json"):
        assert (folder / name).is_file()
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    marker = json.loads((folder / "leapgen_source.json").read_text())
    assert marker["size"] == find_default_gguf().stat().st_size
    assert loaded_model.tokenizer.chat_template
    # No temporary folders left behind.
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.model
def test_load_a_local_folder(loaded_model):
    again = load_model(loaded_model.path)
    assert again.path == loaded_model.path and not again.converted
    assert again.model.config.vocab_size == loaded_model.model.config.vocab_size


@pytest.mark.model
@pytest.mark.slow
def test_first_load_converts_then_reuses(loaded_model, tmp_path):  # loaded_model: skips without the package
    first = load_model("default", cache_dir=tmp_path)
    assert first.converted
    second = load_model("default", cache_dir=tmp_path)
    assert not second.converted and second.path == first.path
    assert second.load_s < first.load_s
    assert sorted(os.listdir(tmp_path)) == ["smollm2-135m-instruct"]
