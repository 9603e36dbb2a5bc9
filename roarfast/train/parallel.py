"""Data parallelism under torchrun (or any initialized default process group): every rank holds the data,
shuffles it identically and trains on its share of each batch with DistributedDataParallel; evaluation is
split across ranks and summed, so all ranks select the same epoch and end with the same weights."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def distributed() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """tensor summed over the ranks, in place (unchanged without a process group)."""
    if distributed()[1] > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


@torch.no_grad()
def average_buffers(model: torch.nn.Module, world: int) -> None:
    """Averages floating buffers (BN statistics, which each rank gathers from its own share) over ranks."""
    if world > 1:
        for buffer in model.buffers():
            if buffer.is_floating_point():
                all_reduce_sum(buffer).div_(world)


def data_parallel(net: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """What a step calls: net itself, or under a process group its DistributedDataParallel wrapper (every
    rank built net under the same seed, so the weights start identical; DDP averages the gradients)."""
    if distributed()[1] == 1:
        return net

    return DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)


def join_torchrun(device: torch.device) -> torch.device:
    """Under torchrun (WORLD_SIZE > 1) joins the process group (NCCL on GPUs, gloo on CPU) and returns this
    rank's device (cuda:LOCAL_RANK); otherwise returns device unchanged."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return device
