"""Where roarfast's airbench and airbench94's published script differ, one difference at a time (issue 41
item 1): the same decoded CIFAR-10 JPEGs, the same GPU, each variant trained --seeds times after an untimed
set-up. The variants are cumulative, each adding one of airbench94's choices to the one before (its 3x3 head
pool is not among them: at 32 px the last map is 3x3 (31 -> 15 -> 7 -> 3 after the 2x2 stem and three 2x2
pools), so it is the global max pool roarfast takes):

  roarfast      the built-in airbench and its recipe: 45,000 training images (5,000 held out), the epoch
                with the best validation accuracy, zero-padded shifts, the global max pool, ReLU
  all-images    every training image (50,000), the last epoch kept (--recipe select=last), as airbench94 trains
  reflect       shifts (training and test-time views) padded by reflection (--recipe pad=reflect)
  gelu          GELU in place of ReLU (guided backprop needs ReLU: the built-in keeps it)

Seconds are the wall time of train_classifier (data to the device, the whitening fit, training, the
per-epoch validation where there is one, the test with its views), synchronized; airbench94's own timer
covers its whitening fit, training and final test, not its per-epoch evaluation. With --profile, one training
of the last variant runs under torch.profiler: its busiest CUDA kernels and the share of the wall time the
GPU was busy, to say what bounds the step.

Run by benchmarks/gpu_round.py --parts gap (scripts/gpu_check.sh stage airbench-gap).
"""

import dataclasses
import time
from functools import partial

import numpy as np
import torch

#: the cumulative variants: (name, what it adds, recipe fields, airbench factory options, all images)
VARIANTS = (
    ("roarfast", "the built-in airbench, its recipe", {}, {}, False),
    ("all-images", "+ every training image (none held out), the last epoch kept", {"select": "last"}, {}, True),
    ("reflect", "+ shifts padded by reflection", {"select": "last", "pad": "reflect"}, {}, True),
    ("gelu", "+ GELU", {"select": "last", "pad": "reflect"}, {"activation": "gelu"}, True),
)


def variant_inputs(ds, device, recipe_fields: dict, model_options: dict, all_images: bool, epochs=None):
    """(dataset, model spec, recipe) of one variant: all_images trains on the whole train split (no
    validation images, so the last epoch is kept)."""
    from roarfast.models.airbench import airbench
    from roarfast.models.spec import ModelSpec
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions

    data = dataclasses.replace(ds, val_index=torch.empty(0, dtype=torch.int64)) if all_images else ds
    recipe = effective_recipe("airbench", device, data, TrainOptions(epochs=epochs, recipe=recipe_fields))
    name = "airbench" + "".join(f"-{v}" for v in model_options.values())
    spec = ModelSpec(name, partial(airbench, **model_options), builtin=True) if model_options else "airbench"
    return data, spec, recipe


def run_gap(ds, device, seeds: int, epochs=None, profile_out=None, sync=lambda: None) -> tuple[dict, str]:
    """Every variant `seeds` times: (rows and recipes, markdown)."""
    from roarfast.train import train_classifier

    rows, recipes = [], {}
    for name, adds, fields, options, all_images in VARIANTS:
        data, spec, recipe = variant_inputs(ds, device, fields, options, all_images, epochs)
        recipes[name] = recipe.to_dict()
        train_classifier(data, spec, recipe.replace(epochs=1), device, seed=99, progress=False)  # set-up, untimed
        for seed in range(seeds):
            sync()
            start = time.perf_counter()
            result = train_classifier(data, spec, recipe, device, seed=seed, progress=False)
            sync()
            rows.append(dict(variant=name, seed=seed, test_acc=result.test_acc, train_images=len(data.train_index),
                             seconds=time.perf_counter() - start))
            print(f"{name} seed {seed}: {result.test_acc:.2%} in {rows[-1]['seconds']:.2f} s", flush=True)
    lines = ["| variant | adds | training images | test acc (TTA), mean (min-max) | seconds, mean |",
             "| --- | --- | ---: | ---: | ---: |"]
    for name, adds, *_ in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        accs = [r["test_acc"] for r in mine]
        lines.append(f"| {name} | {adds} | {mine[0]['train_images']:,} | {np.mean(accs):.2%} "
                     f"({min(accs):.2%}-{max(accs):.2%}) | {np.mean([r['seconds'] for r in mine]):.2f} |")
    result = dict(rows=rows, recipes=recipes)
    if profile_out is not None:
        result["profile"], text = profile_training(ds, device, epochs, profile_out, sync)
        lines += ["", text]
    return result, "\n".join(lines) + "\n"


def profile_training(ds, device, epochs, out, sync) -> tuple[dict, str]:
    """One training of the last variant under torch.profiler: the table of its kernels written to `out`, the
    ten busiest and the GPU's busy share of the wall time returned."""
    from torch.profiler import ProfilerActivity, profile

    from roarfast.train import train_classifier

    name, _, fields, options, all_images = VARIANTS[-1]
    data, spec, recipe = variant_inputs(ds, device, fields, options, all_images, epochs)
    sync()
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        train_classifier(data, spec, recipe, device, seed=0, progress=False)
        sync()
    wall = time.perf_counter() - start
    events = prof.key_averages()
    out.write_text(events.table(sort_by="self_cuda_time_total", row_limit=60))
    kernels = sorted((e for e in events if getattr(e, "self_device_time_total", 0) > 0),
                     key=lambda e: e.self_device_time_total, reverse=True)
    busy = sum(e.self_device_time_total for e in kernels) / 1e6
    top = [dict(name=e.key[:90], calls=e.count, seconds=e.self_device_time_total / 1e6) for e in kernels[:10]]
    lines = [f"Profile of one `{name}` training: {wall:.2f} s wall under the profiler, the GPU busy "
             f"{busy:.2f} s of it ({busy / wall:.0%}); busiest kernels:", "",
             "| kernel | calls | seconds |", "| --- | ---: | ---: |"]
    lines += [f"| `{t['name']}` | {t['calls']} | {t['seconds']:.3f} |" for t in top]
    return dict(wall=wall, busy=busy, top=top), "\n".join(lines)
