"""Shared pytest setup: the `cuda` marker skips without a GPU; `devices()` parametrizes CPU (+CUDA);
roarfast's measurement cache goes to a fresh folder, never the user's; CPU training is fp32 on every CPU."""

import os
import tempfile

import pytest
import torch


def pytest_configure(config):
    os.environ["ROARFAST_CACHE_DIR"] = tempfile.mkdtemp(prefix="roarfast-test-cache-")
    # CPU training in fp32 whatever the CPU (--amp auto picks bf16 where it is native), here and in every
    # subprocess, so expected values hold on any machine; tests/test_train.py covers the choice and bf16 itself
    os.environ["ROARFAST_NATIVE_BF16"] = "0"


def cuda_available() -> bool:
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def devices():
    """['cpu', 'cuda'] with 'cuda' marked, for @pytest.mark.parametrize('device', devices())."""
    return ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
