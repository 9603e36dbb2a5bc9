"""Shared pytest setup: the `cuda` marker skips without a GPU; `devices()` parametrizes CPU (+CUDA);
roarfast's measurement cache goes to a fresh folder, never the user's; CPU training is fp32 on every CPU; the files
marked `minutes(N)` are collected first, the longest first."""

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


def minutes(item) -> float:
    """The minutes a test's file declares it takes on 2 cores (`pytestmark = pytest.mark.minutes(N)`), else 0."""
    marker = item.get_closest_marker("minutes")
    return marker.args[0] if marker else 0


def pytest_collection_modifyitems(config, items):
    # the longest files first (a stable sort: each file's tests stay together and in order): the test command's
    # worker processes take files in this order (scripts/test.sh: --dist loadfile --no-loadscope-reorder), so a
    # file of several minutes never starts last while the other workers have finished (that tail cost CI minutes)
    items.sort(key=lambda item: -minutes(item))
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def devices():
    """['cpu', 'cuda'] with 'cuda' marked, for @pytest.mark.parametrize('device', devices())."""
    return ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
