"""Model probing before any training: a network built once to check what it returns, and the size of its
checkpoint counted without memory, so that a faulty factory or a full disk is refused up front."""

import torch

from roarfast.models import resolve_model


def checked_model(model, ds):
    """The ModelSpec of `model` (resolve_model) after one network built for `ds` returned logits of the right
    shape: a factory's mistake is a one-line UserError before any training."""
    spec = resolve_model(model)
    if not spec.builtin:
        spec.check(ds.num_classes, ds.image_size, ds.channels)
    return spec


def checkpoint_bytes(spec, ds) -> int:
    """Bytes of the checkpoint of ModelSpec `spec` for dataset ds (its state dict), counted on a model built on
    the meta device (no memory, no time); 0 for a model that cannot be built there."""
    try:
        with torch.device("meta"):
            model = spec.build(ds.num_classes, ds.image_size, ds.channels)
    except Exception:  # noqa: BLE001  (a model that needs real tensors to build: the write margin alone is checked)
        return 0
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())
