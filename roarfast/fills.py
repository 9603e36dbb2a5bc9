"""The fills: what replaces the pixels a ROAR/KAR fraction removes (DESIGN.md section 2). Every list of
fill names and every fill constant is defined here; the CLI's choices are built from FILLS.

Light on purpose (no torch): the CLI imports it to build its options.
"""

from roarfast.errors import UserError

#: the per-channel mean of the training split: 0 after normalization (the paper's fill)
DEFAULT_FILL = "dataset-mean"
#: ROAD's noisy linear imputation (roarfast.imputation), done by the loaders instead of a constant
ROAD_FILL = "road"
#: every --fill: three constants and the imputation
FILLS = (DEFAULT_FILL, "imagenet-mean", "zero", ROAD_FILL)
#: per-channel ImageNet mean in [0,1] pixel space, for --fill imagenet-mean
IMAGENET_MEAN = (0.485, 0.456, 0.406)


def fill_values(fill: str, mean, std) -> tuple | str:
    """The replacement value per channel in the normalized space the model sees, or "road" (the loaders
    impute the removed pixels instead). mean, std: the dataset's, per channel in [0, 1] pixel space."""
    if fill == ROAD_FILL:
        return ROAD_FILL
    if fill == DEFAULT_FILL:
        return tuple(0.0 for _ in mean)
    if fill == "zero":
        return tuple(-m / s for m, s in zip(mean, std))
    if fill != "imagenet-mean":  # the options checked the name: this is a caller's mistake
        raise ValueError(f"fill should be one of {', '.join(FILLS)}, got {fill!r}")
    if len(mean) != 3:
        raise UserError(f"--fill imagenet-mean needs 3-channel images, the dataset has {len(mean)}")
    return tuple((im - m) / s for im, m, s in zip(IMAGENET_MEAN, mean, std))
