"""The fills: what replaces the pixels (or values) a ROAR/KAR fraction removes. A fill is an object (`Fill`):
a constant one says its value per channel (`ConstantFill.values`), which the loaders fuse with the
normalization (ops.mask_normalize); a computed one fills uint8 images itself (`Fill.apply`; road: ROAD's noisy
linear imputation). Each built-in lives in a module of this package (constant.py: dataset-mean,
imagenet-mean, zero; road.py) that registers it with `register_fill`; FILLS, the fill resolver, finds them
there. The loaders, the cells, the no-retrain evaluations, the fill-leakage detector, the report and the
CLI's --fill choices ask the Fill, never its name: a new fill is one module here plus its tests.

Light on purpose (no torch at import, here and in every fill module): the CLI builds --fill from FILLS.
"""

from roarfast.errors import UserError
from roarfast.common.resolver import Entry, Resolver, declaring_module

#: the per-channel mean of the training split: 0 after normalization (the paper's fill)
DEFAULT_FILL = "dataset-mean"
#: ROAD's noisy linear imputation (fills/road.py): the no-retrain `road` metric's fill
ROAD_FILL = "road"


class Fill:
    """What replaces the units a ROAR/KAR fraction removes. A subclass sets `name` and `description` and
    implements `apply`; a constant fill derives from ConstantFill and implements `values` instead.

    pixel_ranks: None where any ranks serve; else why the fill needs pixel ranks [N, H, W] ("imputes whole
        pixels"), which the message refusing --granularity value ranks gives.
    whole_split_chunk: None: a loader fills each batch as it reads it; a number: a loader holding its split
        in memory fills the whole split once, this many images a call (a fill that costs more than a copy,
        like road's solve, then runs once per cell, not once per epoch). A streamed split is filled batch by
        batch, whatever `apply` draws keyed by the sample index.
    cites: the keys of the papers it comes from (roarfast.report.citations holds their BibTeX).
    """

    name: str = ""
    description: str = ""
    pixel_ranks: str | None = None
    whole_split_chunk: int | None = None
    cites: tuple = ()

    def values(self, mean, std) -> tuple | None:
        """The replacement per channel in the normalized space the model sees (a constant fill), or None
        (`apply` computes it). mean, std: the dataset's, per channel in [0, 1] pixel space."""
        return None

    def apply(self, images, ranks, fraction: float, keep: bool, *, mean, std, ids, out_dtype=None,
              channels_last: bool = False):
        """uint8 images (Tensor[B, C, H, W]) with the units of `ranks` (Tensor[B, H, W] or [B, C, H, W]) that
        `fraction` selects replaced (keep=False, ROAR: the top fraction; keep=True, KAR: all but it) and the
        rest normalized as (x / 255 - mean) / std, like ops.mask_normalize: Tensor[B, C, H, W] of out_dtype
        (default float32), channels_last or contiguous.

        mean, std: per channel in [0, 1] pixel space (sequences). ids (int64 Tensor[B]): each image's index
        in its split, the key of whatever the fill draws, so an image is filled alike in every batch and epoch.
        """
        raise NotImplementedError(f"fill {self.name!r} should implement apply")

    def check_dataset(self, mean, std) -> None:
        """Refuses (UserError), before anything is trained, a dataset this fill cannot serve."""
        self.values(mean, std)

    def check_ranks(self, shape, whose: str = "the ranks") -> None:
        """Refuses (UserError) ranks of `shape` this fill cannot use: value ranks where it needs pixel ranks."""
        if self.pixel_ranks is not None and len(shape) != 3:
            raise UserError(f"--fill {self.name} {self.pixel_ranks} and needs pixel ranks [N, H, W], but {whose} "
                            f"are {tuple(shape)} (extract with --granularity pixel)")

    def __repr__(self) -> str:
        return f"<fill {self.name}>"


class ConstantFill(Fill):
    """A fill of one value per channel: `values` says it, `apply` is ops.mask_normalize's fused mask and
    normalization (what every loader did with a constant), so it serves any ranks, pixel or value."""

    def values(self, mean, std) -> tuple:
        raise NotImplementedError(f"constant fill {self.name!r} should implement values")

    def apply(self, images, ranks, fraction: float, keep: bool, *, mean, std, ids=None, out_dtype=None,
              channels_last: bool = False):
        # late: loads torch, and --help imports this module
        import torch

        from roarfast import ops

        return ops.mask_normalize(images, ranks, fraction, self.values(mean, std), keep, mean=mean, std=std,
                                  out_dtype=out_dtype or torch.float32, channels_last=channels_last)


class Values(ConstantFill):
    """Per-channel values given in the normalized space (a loader's `fill=(...)`: the mask-only control's
    -1, a test's numbers), whatever the dataset's statistics."""

    name = "values"
    description = "per-channel values given in the normalized space"

    def __init__(self, values):
        self._values = tuple(float(v) for v in values)

    def values(self, mean, std) -> tuple:
        return self._values


#: every --fill: the built-ins registered by this package's modules
FILLS = Resolver("fill", "--fill", package="roarfast.fills")


def register_fill(fill: Fill, order: float = 0.0) -> Fill:
    """Makes `fill` a built-in (each module of this package calls it as it is imported); FILLS lists the
    built-ins by `order`, then by the module that defines the fill's class, then as registered. Returns the fill."""
    if not isinstance(fill, Fill):
        raise TypeError(f"a fill should be a roarfast.fills.Fill, got {type(fill).__name__}")
    FILLS.register(Entry(fill.name, fill.description, value=fill, order=order, module=declaring_module(fill)))
    return fill


def resolve_fill(fill) -> Fill:
    """The Fill that `fill` is or names: a Fill, a built-in's name (FILLS), per-channel values in the
    normalized space (Values), or None (the default, DEFAULT_FILL). An unknown name is a UserError listing
    the names."""
    if isinstance(fill, Fill):
        return fill
    if fill is None:
        fill = DEFAULT_FILL
    if isinstance(fill, str):
        return FILLS.load(fill)
    try:
        return Values(fill)
    except (TypeError, ValueError):
        raise ValueError(f"fill should be a Fill, a name ({', '.join(FILLS.names)}) or per-channel values, got "
                         f"{fill!r}") from None


def removed_pixels(ranks, fraction: float, keep: bool):
    """bool Tensor[B, H, W]: the pixels a ROAR (keep=False) or KAR (keep=True) fraction of pixel ranks
    (Tensor[B, H, W]) replaces."""
    # late: loads torch, and --help imports this module
    from roarfast import ops

    if ranks.dim() != 3:
        raise UserError(f"a removal pattern of whole pixels needs pixel ranks [N, H, W], got ranks of shape "
                        f"{tuple(ranks.shape)} (extract with --granularity pixel)")
    k = ops.units_for_fraction(fraction, ranks.shape[1] * ranks.shape[2])
    ranks = ops.ranks_as_int32(ranks)
    return ranks >= k if keep else ranks < k
