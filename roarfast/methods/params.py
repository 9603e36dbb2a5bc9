"""What an estimator receives: one batch to explain (`ExplainBatch`) and the options (`MethodParams`)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from roarfast.errors import UserError
from roarfast.methods.parameters import PARAMETERS, parameter_fields

AUTOCAST_DTYPES = (None, torch.bfloat16, torch.float16)


@dataclass
class ExplainBatch:
    """One batch of images to explain.

    Attributes:
        x (Tensor[B, C, H, W]): normalized float input, on the model's device.
        target (Tensor[B]): int64 labels; the explained class when `MethodParams.target == "label"`.
        index (Tensor[B]): int64 global indices of the images within their split (seeds per-image randomness).
        gt_mask (Tensor[B, H, W] or None): bool ground-truth importance, for the oracle.
        seed: this batch's seed, or None for MethodParams.seed (see `seed_for`).
    """

    x: torch.Tensor
    target: torch.Tensor
    index: torch.Tensor
    gt_mask: torch.Tensor | None = None
    seed: int | None = None

    def __post_init__(self):
        if not isinstance(self.x, torch.Tensor) or self.x.dim() != 4 or not self.x.is_floating_point():
            raise UserError(f"ExplainBatch.x should be a float Tensor[B, C, H, W], got {_describe(self.x)}")
        batch = self.x.shape[0]
        for name in ("target", "index"):
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor) or value.shape != (batch,) or value.dtype != torch.int64:
                raise UserError(f"ExplainBatch.{name} should be an int64 Tensor[{batch}], got {_describe(value)}")
        if self.gt_mask is not None:
            expected = (batch, self.x.shape[2], self.x.shape[3])
            if self.gt_mask.shape != expected or self.gt_mask.dtype != torch.bool:
                raise UserError(f"ExplainBatch.gt_mask should be a bool Tensor{list(expected)} or None, "
                                f"got {_describe(self.gt_mask)}")


@dataclass
@parameter_fields(PARAMETERS, ig_baseline=None)
class MethodParams:
    """Options of the estimators: a field per shared parameter, named, defaulted and checked as
    roarfast.methods.parameters.PARAMETERS says (README, "Semantics", says why they are what they are):
    samples, noise_level, ig_steps, ig_baseline, target, gradcam_layer; and the fields below.

    `ig_baseline` is the per-channel IG baseline in the normalized space, as numbers (black is
    `black_baseline(mean, std)`), and None by default: every IG-based method needs it set (there is no
    neutral default).

    Attributes:
        max_chunk_elements: most input elements (rows x C x H x W) in one forward/backward; SmoothGrad
            samples and IG steps are split into chunks under it (one noise sample of the whole batch
            is the smallest chunk, so the caller's batch size bounds memory from below).
        autocast_dtype: None (fp32), torch.bfloat16 or torch.float16 for the model's forward/backward
            on CUDA; on CPU computation stays fp32 (CPU autocast is slower than fp32 there).
        seed: the run's seed; every random draw is keyed by it, the estimator and the image's index in its
            split (roarfast.methods.draws; a batch's own seed, when set, takes its place).
        args: the estimator's own arguments (`--method-arg`): compute_maps hands each estimator those it takes
            (Estimator.call_arguments).
    """

    max_chunk_elements: int = 2**24
    autocast_dtype: torch.dtype | None = None
    seed: int = 0
    args: Mapping = field(default_factory=dict)

    def __post_init__(self):
        for name, parameter in PARAMETERS.items():
            if not (name == "ig_baseline" and self.ig_baseline is None):  # unset: an IG method refuses it
                parameter.check(getattr(self, name), name)
        if not isinstance(self.max_chunk_elements, int) or self.max_chunk_elements < 1:
            raise UserError(f"max_chunk_elements should be a positive int, got {self.max_chunk_elements!r}")
        if self.autocast_dtype not in AUTOCAST_DTYPES:
            raise UserError("autocast_dtype should be None, torch.bfloat16 or torch.float16, "
                            f"got {self.autocast_dtype}")

    def seed_for(self, batch: ExplainBatch) -> int:
        """The seed of a batch's randomness: its own when set, else the run's."""
        return self.seed if batch.seed is None else batch.seed

    def baseline(self, x: torch.Tensor) -> torch.Tensor:
        """The IG baseline as Tensor[1, C, 1, 1] on x's device and dtype (x: Tensor[B, C, H, W])."""
        if self.ig_baseline is None:
            raise UserError("ig_baseline is not set: IG-based methods need the normalized value of a black "
                            "pixel per channel, black_baseline(dataset.mean, dataset.std)")
        baseline = torch.as_tensor(self.ig_baseline, dtype=x.dtype, device=x.device).flatten()
        if baseline.numel() != x.shape[1]:
            raise UserError(f"ig_baseline should hold {x.shape[1]} values (one per channel), got {baseline.numel()}")
        return baseline.view(1, -1, 1, 1)


def black_baseline(mean: Sequence[float], std: Sequence[float]) -> tuple[float, ...]:
    """The normalized value of a black (0) pixel per channel: (0 - mean[c]) / std[c]."""
    if len(mean) != len(std):
        raise UserError(f"mean and std should have one value per channel each, got {len(mean)} and {len(std)}")
    return tuple(-m / s for m, s in zip(mean, std))


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} Tensor{list(value.shape)}"
    return type(value).__name__
