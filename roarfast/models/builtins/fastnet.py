"""fastnet, fastnet-small and fastnet-gpu: the small plain CNNs of roarfast.models.fastnet and their recipes."""

from roarfast.models.registry import MODELS, ModelEntry

#: the listing's place of this family: after airbench
ORDER = 2

MODELS.register(ModelEntry(
    "fastnet", "CPU default for 32px data: 3 conv stages (16/32/64), about 3 M multiply-adds per image",
    target="roarfast.models.fastnet:fastnet", recipe={"epochs": 8, "batch_size": 128, "lr": 0.05},
    order=ORDER, module=__name__))

#: tuned for trainings of a few hundred steps (the quick preset's 3 epochs of 1,350 images): batch 24 for more steps
#: per image seen, and an EMA that forgets within 10 steps (fastnet's 0.98 still remembers the first steps at the end)
MODELS.register(ModelEntry(
    "fastnet-small", "`roarfast run`'s net: fastnet at half width (8/16/32), about 0.8 M multiply-adds per image",
    target="roarfast.models.fastnet:fastnet_small",
    recipe={"epochs": 8, "batch_size": 24, "lr": 0.05, "ema_decay": 0.9}, order=ORDER, module=__name__))

MODELS.register(ModelEntry(
    "fastnet-gpu", "GPU default for 33-64 px data: airbench-shaped net (64/256/256) with a learned stem, ReLU",
    target="roarfast.models.fastnet:fastnet_gpu",
    recipe={"epochs": 10, "batch_size": 256, "lr": 0.2, "label_smoothing": 0.2}, order=ORDER, module=__name__))
