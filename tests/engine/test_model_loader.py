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


def test_the_first_conversion_says_what_where_and_how_big(monkeypatch, tmp_path, caplog):
    """The conversion itself is the slow test above; here it is stood in for, to read what it logs."""
    import logging

    from leapgen.engine import model_loader

    try:
        gguf = find_default_gguf()
    except ModelLoadError as exc:
        pytest.skip(str(exc))

    def fake_convert(source, folder):
        folder.mkdir(parents=True)
        for name in model_loader._REQUIRED_FILES:
            (folder / name).write_bytes(b"0" * 1_000_000)
        (folder / model_loader._MARKER).write_text(json.dumps(model_loader._source_marker(source)))

    monkeypatch.setattr(model_loader, "_convert_gguf", fake_convert)
    monkeypatch.setattr(model_loader, "_load_folder", lambda folder: (None, None))
    with caplog.at_level(logging.INFO, logger=model_loader.__name__):
        assert load_model("default", cache_dir=tmp_path).converted
    text = "\n".join(r.getMessage() for r in caplog.records)
    folder = tmp_path / model_loader._SMOLLM2_CACHE_NAME
    assert f"converting the embedded SmolLM2-135M-Instruct ({gguf.name}, 98 MB" in text
    assert str(folder) in text and "about 540 MB" in text and "LEAPGEN_CACHE" in text
    assert f"3 MB written to {folder}" in text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=model_loader.__name__):
        assert not load_model("default", cache_dir=tmp_path).converted
    assert not caplog.records  # later loads say nothing
