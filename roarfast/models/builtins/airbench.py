"""airbench: airbench94's network (roarfast.models.airbench) and its training, as one recipe block."""

from roarfast.models.registry import MODELS, ModelEntry

#: the listing's place of this family: first
ORDER = 1

#: airbench94's training (per 1,024 images over a summed loss: lr 11.5, weight decay 0.0153, momentum 0.85) in this
#: loop's terms (mean loss, decay coupled to lr): lr 1.5 and weight decay 1.33e-3 at batch 1,024. On CPU a quarter
#: of the batch and lr, which a GPU scales back 4x (roarfast.recipe.gpu_batch_scale)
RECIPE = {
    "epochs": 10,  # airbench94: 9.9
    "batch_size": 256,
    "lr": 0.375,
    "momentum": 0.85,
    "weight_decay": 1.33e-3,
    "label_smoothing": 0.2,
    "warmup": 0.23,  # share of the steps rising to the peak lr, then falling (schedule "linear")
    "ema_decay": None,  # lookahead in place of an EMA
    "schedule": "linear",
    "lookahead": True,
    "alternate_flips": True,
    "tta": 2,  # the mirror image and 1-pixel shifts of both
    "bias_lr_scale": 64.0,
}

MODELS.register(ModelEntry(
    "airbench", "GPU default for 32px data: airbench94's net (frozen whitening stem from the training patches, "
    "identity-initialized convs, 64/256/256), ReLU; trains with airbench's recipe",
    target="roarfast.models.airbench:airbench", recipe=RECIPE, order=ORDER, module=__name__))
