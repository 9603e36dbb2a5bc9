"""K models on K CUDA streams in one process: each state's steps are queued on its own stream, so the small
kernels of one model can run beside another's instead of after them. On a CPU (no streams) the states
simply take turns, which is the plain loop."""

from contextlib import contextmanager

import torch


def new_stream(device: torch.device):
    """A fresh CUDA stream on device, or None on a CPU."""
    return torch.cuda.Stream(device) if device.type == "cuda" else None


@contextmanager
def on_stream(stream, tensors: list):
    """Runs the block on `stream` after the work queued so far on the current stream (which made `tensors`);
    `tensors` are marked used by `stream`, so their memory is not reused while it still reads them."""
    stream.wait_stream(torch.cuda.current_stream(stream.device))
    with torch.cuda.stream(stream):
        yield
    for tensor in tensors:
        tensor.record_stream(stream)


def join_streams(states: list) -> None:
    """The current stream waits for the work queued on every state's stream (before an epoch is evaluated)."""
    for state in states:
        if state.stream is not None:
            torch.cuda.current_stream(state.stream.device).wait_stream(state.stream)
