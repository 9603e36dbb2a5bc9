"""An airbench-class classifier for CIFAR-size images, written from the published description of Keller
Jordan's airbench94 (94% on CIFAR-10 in about 3.5 A100-seconds): a frozen 2x2 whitening stem computed from
the training images' patches, three conv groups (conv, 2x2 max pool, BN, activation, conv, BN, activation)
of widths 64/256/256 whose convolutions start as identity maps, BN with fast statistics, frozen scales and
a tiny eps, a global max pool and a bias-free linear head scaled by 1/9. Its training (lookahead, label
smoothing 0.2, alternating flips, flip-and-translate test-time views, the piecewise-linear schedule, 64x
learning rate for biases) is its recipe block's (roarfast.models.builtins.airbench).

Two hooks the training run calls (roarfast.train.classifier): `init_from_images(images)` before the first step
with the first `init_images` training images as the network will see them (for a ROAR cell, masked), which
fits the whitening stem; `start_epoch(epoch)`, which freezes the stem's bias after WHITEN_BIAS_EPOCHS.

Activations are separate nn.ReLU modules by default (guided backprop hooks them); activation="gelu" builds
airbench's own GELU, to measure what ReLU costs.
"""

import torch
from torch import nn

#: the stem sees 2x2 patches: one filter per eigenvector of their second moments, and its negative
WHITEN_KERNEL = 2
#: added to each eigenvalue before its inverse square root: directions with less energy are not amplified
#: beyond 1/sqrt(eps) (airbench's 5e-4, in units of the normalized images)
WHITEN_EPS = 5e-4
#: training images whose patches the stem is fitted on (airbench: the first 5,000)
WHITEN_IMAGES = 5000
#: images per chunk of the fit, so that 5,000 images' patches never sit in memory at once
WHITEN_CHUNK = 500
#: epochs in which the stem's bias trains; frozen after, the stem needs no backward at all (a speed gain)
WHITEN_BIAS_EPOCHS = 3
#: torch's BN momentum (weight of the new batch): airbench keeps 0.6 of the old statistics
BN_MOMENTUM = 0.4
#: BN eps: airbench's 1e-12, so normalization is by the batch's own variance
BN_EPS = 1e-12
#: logits scaled down so that the head starts in the soft part of the (label-smoothed) loss
LOGIT_SCALE = 1 / 9
#: conv group widths (airbench94's)
WIDTHS = (64, 256, 256)
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class Whitening(nn.Conv2d):
    """The stem: a 2x2 conv whose 2 x C x 4 filters are the eigenvectors of the training patches' second-moment
    matrix, each scaled by 1/sqrt(eigenvalue + WHITEN_EPS), then their negatives (so a ReLU after it keeps both
    signs). The weights are frozen; the bias trains (start_epoch freezes it later)."""

    def __init__(self, in_channels: int):
        patch = in_channels * WHITEN_KERNEL ** 2
        super().__init__(in_channels, 2 * patch, WHITEN_KERNEL, padding=0, bias=True)
        self.weight.requires_grad_(False)

    @torch.no_grad()
    def fit(self, images: torch.Tensor) -> None:
        """Sets the filters from images (Tensor[N, C, H, W], normalized) and zeroes the bias."""
        c, k = self.in_channels, WHITEN_KERNEL
        moment = torch.zeros(c * k * k, c * k * k, dtype=torch.float64, device=images.device)
        count = 0
        for chunk in images.split(WHITEN_CHUNK):
            patches = chunk.double().unfold(2, k, 1).unfold(3, k, 1)  # [n, C, H-1, W-1, k, k]
            patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(-1, c * k * k)  # (C, kh, kw) order, as the weight
            moment += patches.T @ patches
            count += patches.shape[0]
        eigenvalues, eigenvectors = torch.linalg.eigh(moment / max(1, count))
        eigenvalues, eigenvectors = eigenvalues.flip(0), eigenvectors.flip(1)  # strongest direction first
        filters = (eigenvectors.T / (eigenvalues.clamp(min=0) + WHITEN_EPS).sqrt()[:, None]).reshape(-1, c, k, k)
        self.weight.copy_(torch.cat([filters, -filters]).to(self.weight.dtype))
        self.bias.zero_()


def identity_conv(in_channels: int, out_channels: int) -> nn.Conv2d:
    """3x3 same-padding conv without bias whose first min(in, out) filters pass their input channel through
    unchanged (the rest keep torch's default initialization): a deep stack starts near the identity."""
    conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
    with torch.no_grad():
        passed = min(in_channels, out_channels)
        conv.weight[:passed].zero_()
        channel = torch.arange(passed)
        conv.weight[channel, channel, 1, 1] = 1.0
    return conv


def batch_norm(channels: int) -> nn.BatchNorm2d:
    """airbench's BN: fast running statistics, eps BN_EPS, the scale frozen at 1 (only the shift learns)."""
    norm = nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)
    norm.weight.requires_grad_(False)
    return norm


class ConvGroup(nn.Sequential):
    """conv, 2x2 max pool, BN, activation, conv, BN, activation (pooling first halves the second conv's cost)."""

    def __init__(self, in_channels: int, out_channels: int, activation: str = "relu"):
        act = ACTIVATIONS[activation]
        super().__init__(identity_conv(in_channels, out_channels), nn.MaxPool2d(2), batch_norm(out_channels), act(),
                         identity_conv(out_channels, out_channels), batch_norm(out_channels), act())


class AirbenchNet(nn.Module):
    """whitening stem, activation, three ConvGroups, global max pool (airbench's 3x3 max pool at 32 px), a
    bias-free linear head times LOGIT_SCALE. `cam_layer`: the last group."""

    #: training images init_from_images reads (the training loop hands them over)
    init_images = WHITEN_IMAGES

    def __init__(self, num_classes: int, in_channels: int = 3, widths=WIDTHS, activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation should be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        self.whiten = Whitening(in_channels)
        self.act = ACTIVATIONS[activation]()
        w1, w2, w3 = widths
        self.block1 = ConvGroup(self.whiten.out_channels, w1, activation)
        self.block2 = ConvGroup(w1, w2, activation)
        self.block3 = ConvGroup(w2, w3, activation)
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = nn.Linear(w3, num_classes, bias=False)
        self.cam_layer = "block3"

    def forward(self, x):
        """x (Tensor[B, C, H, W]) normalized -> logits (Tensor[B, num_classes])."""
        x = self.block3(self.block2(self.block1(self.act(self.whiten(x)))))
        return self.head(self.pool(x).flatten(1)) * LOGIT_SCALE

    def init_from_images(self, images: torch.Tensor) -> None:
        """Fits the whitening stem on images (Tensor[N, C, H, W], normalized as training sees them)."""
        self.whiten.fit(images)

    def start_epoch(self, epoch: int) -> None:
        """Before epoch `epoch` (from 1): the stem's bias trains in the first WHITEN_BIAS_EPOCHS only."""
        self.whiten.bias.requires_grad_(epoch <= WHITEN_BIAS_EPOCHS)


def airbench(num_classes: int, image_size: int = 32, in_channels: int = 3, activation: str = "relu") -> AirbenchNet:
    """The built-in airbench (any image side from 16 px: it pools globally; tuned for 32)."""
    return AirbenchNet(num_classes, in_channels, activation=activation)
