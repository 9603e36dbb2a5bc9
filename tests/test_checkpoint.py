"""Checkpoints: safetensors + JSON round trip, nothing pickled, stable hash, clear errors."""

import json

import pytest
import torch
from safetensors import safe_open

from roarfast.records.checkpoint import checkpoint_sha256, load_checkpoint, save_checkpoint
from roarfast.errors import UserError
from roarfast.common.fingerprint import sha256_file
from roarfast.models import build_model


def _meta(name="resnet8"):
    return {"model": name, "num_classes": 4, "image_size": 32, "in_channels": 3, "dataset_fingerprint": "ab" * 32,
            "test_acc": 0.5}


def _trained_like(name="resnet8", seed=0):
    """A model whose every parameter and BN statistic differs from a fresh build."""
    torch.manual_seed(seed)
    model = build_model(name, 4)
    with torch.no_grad():
        for tensor in list(model.parameters()) + [b for b in model.buffers() if b.is_floating_point()]:
            tensor.add_(0.1 * torch.rand_like(tensor))
    return model.eval()


@pytest.mark.parametrize("channels_last", [False, True])
def test_round_trip_same_outputs_and_meta(tmp_path, channels_last):
    model = _trained_like()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    save_checkpoint(tmp_path, model, _meta())
    loaded, meta = load_checkpoint(tmp_path)
    assert meta == {**_meta(), "weights_sha256": sha256_file(tmp_path / "model.safetensors")}
    assert not loaded.training
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():  # a channels_last model runs other conv kernels: equal up to rounding
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-5, atol=1e-5)
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_files_are_safetensors_and_json(tmp_path):
    save_checkpoint(tmp_path, _trained_like(), _meta())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json", "model.safetensors"]
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        assert "fc.weight" in f.keys()
    assert json.loads((tmp_path / "meta.json").read_text())["model"] == "resnet8"


def test_sha256_follows_weights_only(tmp_path):
    save_checkpoint(tmp_path / "a", _trained_like(seed=0), _meta())
    save_checkpoint(tmp_path / "b", _trained_like(seed=0), {**_meta(), "test_acc": 0.9})
    save_checkpoint(tmp_path / "c", _trained_like(seed=1), _meta())
    assert checkpoint_sha256(tmp_path / "a") == checkpoint_sha256(tmp_path / "b")
    assert checkpoint_sha256(tmp_path / "a") != checkpoint_sha256(tmp_path / "c")
    assert len(checkpoint_sha256(tmp_path / "a")) == 64


def test_errors_name_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match="in_channels"):
        save_checkpoint(tmp_path, _trained_like(), {"model": "resnet8", "num_classes": 4, "image_size": 32})
    with pytest.raises(UserError, match="model.safetensors"):
        load_checkpoint(tmp_path / "nowhere")
    save_checkpoint(tmp_path, _trained_like(), _meta())
    (tmp_path / "meta.json").write_text(json.dumps({**_meta(), "model": "fastnet"}))
    with pytest.raises(UserError, match="does not fit the weights"):  # weights of another architecture are refused
        load_checkpoint(tmp_path)
