"""Stable hashes: canonical JSON of configurations, sha256 of files."""

import hashlib

import pytest

from roarfast.common.fingerprint import canonical_json, config_hash, sha256_file


def test_config_hash_is_sha256_of_sorted_compact_json():
    config = {"model": "fastnet", "epochs": 8, "lr": 0.5, "fill": (0, 0, 0), "extra": {"b": None, "a": True}}
    expected_text = '{"epochs":8,"extra":{"a":true,"b":null},"fill":[0,0,0],"lr":0.5,"model":"fastnet"}'
    assert canonical_json(config) == expected_text
    assert config_hash(config) == hashlib.sha256(expected_text.encode()).hexdigest()


def test_config_hash_ignores_key_order_and_sees_values():
    a = {"x": 1, "y": [1, 2], "z": {"p": 0.1, "q": "s"}}
    b = {"z": {"q": "s", "p": 0.1}, "y": (1, 2), "x": 1}
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash({**a, "x": 2})
    assert config_hash(a) != config_hash({**a, "y": [2, 1]})


@pytest.mark.parametrize(
    "config, error, match",
    [
        ({"lr": float("nan")}, ValueError, r"config.lr must be a finite number"),
        ({1: "a"}, TypeError, "keys must be str"),
        ({"x": {1, 2}}, TypeError, r"config.x must be None, bool, int, float, str, list, tuple or dict, got set"),
    ],
)
def test_canonical_json_refuses_what_json_cannot_say_exactly(config, error, match):
    with pytest.raises(error, match=match):
        config_hash(config)


def test_sha256_file_over_several_read_blocks(tmp_path):
    data = bytes(range(256)) * 10_000  # 2.5 MB: more than one 1 MiB block
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert sha256_file(str(path)) == hashlib.sha256(data).hexdigest()
