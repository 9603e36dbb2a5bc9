"""A gloo process group for the data-parallel tests' worker processes."""

import contextlib


@contextlib.contextmanager
def gloo_group(rank: int, world: int, init_file):
    """Joins a gloo group of `world` CPU ranks for the block; on success every rank waits for the others
    before the group is torn down: a rank leaving while another's gloo threads still talk to it aborts
    now and then ("terminate called without an active exception")."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        yield
        dist.barrier()
    finally:
        dist.destroy_process_group()
