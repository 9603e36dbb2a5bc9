"""The constant fills: one value per channel, which the loaders fuse with the normalization
(ops.mask_normalize). dataset-mean (the default, the paper's), imagenet-mean and zero."""

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, ConstantFill, register_fill

#: per-channel ImageNet mean in [0, 1] pixel space, for --fill imagenet-mean
IMAGENET_MEAN = (0.485, 0.456, 0.406)


class DatasetMean(ConstantFill):
    name = DEFAULT_FILL
    description = "the training split's per-channel mean, 0 after normalization (the paper's fill)"

    def values(self, mean, std) -> tuple:
        return tuple(0.0 for _ in mean)


class ImageNetMean(ConstantFill):
    name = "imagenet-mean"
    description = "ImageNet's mean pixel (3-channel images)"

    def values(self, mean, std) -> tuple:
        if len(mean) != 3:
            raise UserError(f"--fill {self.name} needs 3-channel images, the dataset has {len(mean)}")
        return tuple((im - m) / s for im, m, s in zip(IMAGENET_MEAN, mean, std))


class Zero(ConstantFill):
    name = "zero"
    description = "black"

    def values(self, mean, std) -> tuple:
        return tuple(-m / s for m, s in zip(mean, std))


for _fill in (DatasetMean(), ImageNetMean(), Zero()):
    register_fill(_fill)
