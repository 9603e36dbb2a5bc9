"""Precision and memory format on a CPU, each way timed in the same run (repetitions interleaved, so that the
machine's load falls on every way alike), the ratio against the way roarfast used before:

- training: one fastnet step (forward, backward, SGD) on a batch of 32x32 images, in fp32 NCHW, fp32
  channels_last (the recipe's default memory format) and bf16 autocast with channels_last (what --amp auto
  picks where the CPU computes bf16 natively: roarfast.common.device.native_bf16); baseline fp32 channels_last;
- extraction: grad and sg-sq maps (the ensemble's 15 noisy samples) of one batch, the model's weights NCHW
  (what a loaded checkpoint holds) against channels_last (what extraction runs: extract.explained_model);
  baseline NCHW. The largest difference between the two ways' maps is reported beside the times.

    python benchmarks/cpu_formats.py [--batch 128] [--explain-batch 256] [--steps 20] [--repeats 5]
                                     [--threads N] [--md out.md]

Weights are random (timing does not depend on them). bf16 rows are left out, saying why, on a CPU without
native bf16, where oneDNN emulates it.
"""

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def train_step_seconds(memory_format, bf16: bool, batch: int, steps: int):
    """A closure timing `steps` fastnet training steps (seconds per step) in the given way."""
    from roarfast.models.fastnet import FastNet

    torch.manual_seed(0)
    model = FastNet(10).to(memory_format=memory_format)
    x = torch.randn(batch, 3, 32, 32).contiguous(memory_format=memory_format)
    y = torch.randint(0, 10, (batch,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(3):  # oneDNN picks and caches its kernels on the first calls
        step()

    def timed():
        started = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - started) / steps

    return timed


def explain_seconds(memory_format, batch: int, maps: dict):
    """A closure timing grad + sg-sq maps of one batch (seconds), the model's weights in `memory_format`;
    the maps of its last call are left in `maps`."""
    from roarfast.methods import ExplainBatch, MethodParams, compute_maps
    from roarfast.models.fastnet import FastNet

    torch.manual_seed(0)
    model = FastNet(10).to(memory_format=memory_format).eval()
    x = torch.randn(batch, 3, 32, 32)
    explain = ExplainBatch(x=x, target=torch.randint(0, 10, (batch,)), index=torch.arange(batch))
    compute_maps(model, explain, "grad,sg-sq", MethodParams())

    def timed():
        started = time.perf_counter()
        maps.update(compute_maps(model, explain, "grad,sg-sq", MethodParams()))
        return time.perf_counter() - started

    return timed


def measure(ways: dict, repeats: int) -> dict:
    """{way: [seconds per repetition]}, the ways interleaved within each repetition."""
    times = {name: [] for name in ways}
    for _ in range(repeats):
        for name, timed in ways.items():
            times[name].append(timed())
    return times


def table(title: str, unit: str, times: dict, baseline: str, scale: float) -> list[str]:
    base = statistics.median(times[baseline])
    lines = [f"**{title}**", "", f"| way | {unit} (median; min-max) | x {baseline} |", "| --- | --- | --- |"]
    for name, values in times.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * scale:.1f} ({min(values) * scale:.1f}-{max(values) * scale:.1f}) | "
                     f"{base / median:.2f} |")
    return lines + [""]


def main(argv=None):
    from roarfast.common.device import native_bf16

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128, help="training batch (fastnet's CPU recipe: 128)")
    parser.add_argument("--explain-batch", type=int, default=256, help="extraction batch (CPU default: 256)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per repetition")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--md", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    last = torch.channels_last
    training = {"fp32 NCHW": train_step_seconds(torch.contiguous_format, False, args.batch, args.steps),
                "fp32 channels_last": train_step_seconds(last, False, args.batch, args.steps)}
    native = native_bf16("cpu")
    if native:
        training["bf16 channels_last"] = train_step_seconds(last, True, args.batch, args.steps)
    nchw_maps, last_maps = {}, {}
    extraction = {"NCHW weights": explain_seconds(torch.contiguous_format, args.explain_batch, nchw_maps),
                  "channels_last weights": explain_seconds(last, args.explain_batch, last_maps)}

    lines = [f"`python benchmarks/cpu_formats.py` on {platform.processor() or platform.machine()}, "
             f"{torch.get_num_threads()} threads, torch {torch.__version__}; {args.repeats} repetitions, interleaved.",
             ""]
    lines += table(f"fastnet training step, batch {args.batch}", "ms per step", measure(training, args.repeats),
                   "fp32 channels_last", 1000)
    if not native:
        lines += ["bf16 left out: this CPU has no native bf16 (AVX512-BF16 or AMX), where --amp auto trains fp32.", ""]
    lines += table(f"grad + sg-sq maps of {args.explain_batch} images", "s per batch",
                   measure(extraction, args.repeats), "NCHW weights", 1)
    differences = ", ".join(f"{name} {(nchw_maps[name] - last_maps[name]).abs().max().item():.1e} "
                            f"(largest value {nchw_maps[name].abs().max().item():.1e})" for name in nchw_maps)
    lines.append(f"Largest difference between the two ways' maps: {differences}.")
    text = "\n".join(lines)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
