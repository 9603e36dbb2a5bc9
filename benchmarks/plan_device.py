"""The share of a GPU's stated peak that a ResNet-50 step at 224 px reaches, to check the shares `roarfast sweep
--dry-run --plan-device` costs a device it does not have with (roarfast.planning.costs.SHARE, measured with the airbench
model on an H200; not yet run on any GPU): a training step as
roarfast.planning.estimate.measure_steps times it (forward, backward, plain SGD update; bf16 autocast, channels_last,
ReLUs not in place as roarfast's ResNets have them), an evaluation pass, and the passes of extraction (a
gradient of the input, one image per row; IG's steps as rows of one pass), each timed after warm-up, with the
FLOPs torch's flop counter counts for the same shapes. Plain PyTorch and torchvision only, so that it runs where
roarfast's extension is not built.

    python benchmarks/plan_device.py [--batch 256] [--json out.json]
"""

import argparse
import json
import time

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode

#: dense bf16 tensor-core and fp32 peaks of an H100 SXM (NVIDIA H100 datasheet; the sparsity figures are twice these)
PEAK = {"bf16": 989e12, "fp32": 67e12}


def resnet50(device):
    model = torchvision.models.resnet50(num_classes=1000)
    for module in model.modules():
        if isinstance(module, torch.nn.ReLU):
            module.inplace = False
    return model.to(device, memory_format=torch.channels_last)


def timed(fn, repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls, the queue drained around each."""
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return best


def flops(fn) -> float:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--explain-batch", type=int, default=64)
    parser.add_argument("--ig-rows", type=int, default=111)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = resnet50(device)
    x = torch.randn(args.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    bf16 = torch.autocast("cuda", dtype=torch.bfloat16)

    def step(precision=torch.bfloat16):
        with torch.autocast("cuda", dtype=precision or torch.float32, enabled=precision is not None):
            loss = loss_fn(model(x).float(), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.1)
                p.grad = None

    def fp32_step():
        step(None)

    def evaluate():
        with torch.no_grad(), bf16:
            model(x)

    def input_gradient(rows):
        def run():
            z = torch.randn(rows, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
            z.requires_grad_(True)
            with bf16:
                out = model(z).float()
            out[:, 0].sum().backward()  # the parameters frozen: the gradient of the input alone
        return run

    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "batch": args.batch}
    model.train()
    for _ in range(10):
        step()
    torch.cuda.reset_peak_memory_stats()
    out["train_s_per_batch"] = timed(step, 20)
    out["train_peak_bytes"] = torch.cuda.max_memory_allocated()
    out["train_flops_per_image"] = flops(step) / args.batch
    for _ in range(3):
        fp32_step()
    out["fp32_train_s_per_batch"] = timed(fp32_step, 10)
    out["fp32_utilization"] = out["train_flops_per_image"] * args.batch / out["fp32_train_s_per_batch"] / PEAK["fp32"]
    out["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    model.eval()
    for _ in range(5):
        evaluate()
    out["eval_s_per_batch"] = timed(evaluate, 20)
    out["eval_flops_per_image"] = flops(evaluate) / args.batch
    model.requires_grad_(False)  # as extraction explains the model: frozen parameters
    for name, rows in (("grad", args.explain_batch), ("ig_rows", args.ig_rows)):
        run = input_gradient(rows)
        for _ in range(5):
            run()
        torch.cuda.reset_peak_memory_stats()
        out[f"{name}_s_per_pass"] = timed(run, 20)
        out[f"{name}_peak_bytes"] = torch.cuda.max_memory_allocated()
        out[f"{name}_flops_per_row"] = flops(run) / rows
        out[f"{name}_rows"] = rows
    for name, images in (("train", args.batch), ("eval", args.batch)):
        rate = out[f"{name}_flops_per_image"] * images / out[f"{name}_s_per_batch"]
        out[f"{name}_images_per_s"] = images / out[f"{name}_s_per_batch"]
        out[f"{name}_utilization_bf16"] = rate / PEAK["bf16"]
    for name in ("grad", "ig_rows"):
        rate = out[f"{name}_flops_per_row"] * out[f"{name}_rows"] / out[f"{name}_s_per_pass"]
        out[f"{name}_rows_per_s"] = out[f"{name}_rows"] / out[f"{name}_s_per_pass"]
        out[f"{name}_utilization_bf16"] = rate / PEAK["bf16"]
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
