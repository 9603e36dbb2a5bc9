"""Small plain CNNs for 32px images: `FastNet` (the CPU default, a few MFLOP per image; at half its widths
`roarfast run`'s net) and `AirNet` (the GPU default, shaped after airbench's CIFAR-10 net: conv-pool-BN-ReLU
blocks, a scaled linear head), the factories of the built-ins fastnet, fastnet-small and fastnet-gpu (declared, with
their recipes, in roarfast.models.builtins.fastnet).

ReLUs are separate nn.ReLU modules (never inplace, never functional) so guided backprop can hook them.
"""

from torch import nn


def conv_bn_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    """3x3 same-padding conv (no bias: BN follows), batch norm, ReLU."""
    return [nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU()]


class FastNet(nn.Module):
    """Three conv stages at full, 1/2 and 1/4 resolution, each followed by 2x2 max pooling, then a global
    max pool and a linear head. Widths (16, 32, 64): about 2.8 M multiply-adds per 32x32 image."""

    def __init__(self, num_classes: int, in_channels: int = 3, widths=(16, 32, 64)):
        super().__init__()
        w1, w2, w3 = widths
        self.stage1 = nn.Sequential(*conv_bn_relu(in_channels, w1), nn.MaxPool2d(2))
        self.stage2 = nn.Sequential(*conv_bn_relu(w1, w2), nn.MaxPool2d(2))
        self.stage3 = nn.Sequential(*conv_bn_relu(w2, w3))
        # global max: the object is small and anywhere in the image, so its strongest response is the evidence
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = nn.Linear(w3, num_classes)
        self.cam_layer = "stage3"

    def forward(self, x):
        """x (Tensor[B, C, H, W]) normalized -> logits (Tensor[B, num_classes])."""
        return self.head(self.pool(self.stage3(self.stage2(self.stage1(x)))).flatten(1))


class AirBlock(nn.Sequential):
    """airbench's block: conv, 2x2 max pool, BN, ReLU, conv, BN, ReLU (pooling early halves the second conv's cost)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__(nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.MaxPool2d(2),
                         nn.BatchNorm2d(out_channels), nn.ReLU(),
                         nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class AirNet(nn.Module):
    """airbench-class 32px net: a 2x2 stem conv (airbench's whitening layer, here learned), three AirBlocks
    of widths (64, 256, 256), global max pool, a linear head whose output is scaled down (airbench's 1/9)
    to keep early logits small. ReLU in place of airbench's GELU, for guided backprop."""

    #: airbench's logit scale
    LOGIT_SCALE = 1 / 9

    def __init__(self, num_classes: int, in_channels: int = 3, widths=(64, 256, 256), stem_width: int = 24):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, stem_width, 2, padding=0, bias=True), nn.ReLU())
        w1, w2, w3 = widths
        self.block1 = AirBlock(stem_width, w1)
        self.block2 = AirBlock(w1, w2)
        self.block3 = AirBlock(w2, w3)
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = nn.Linear(w3, num_classes, bias=False)
        self.cam_layer = "block3"

    def forward(self, x):
        """x (Tensor[B, C, H, W]) normalized -> logits (Tensor[B, num_classes])."""
        x = self.block3(self.block2(self.block1(self.stem(x))))
        return self.head(self.pool(x).flatten(1)) * self.LOGIT_SCALE


def fastnet(num_classes: int, image_size: int, in_channels: int) -> FastNet:
    """The built-in fastnet (any image size: it pools globally)."""
    return FastNet(num_classes, in_channels)


#: fastnet-small's widths: half fastnet's. Its cost is no longer in the convolutions' arithmetic (6-12-24 trains no
#: faster), and a quick-preset cell takes 0.55x fastnet's CPU time (benchmarks/quick_cells.py)
SMALL_WIDTHS = (8, 16, 32)


def fastnet_small(num_classes: int, image_size: int, in_channels: int) -> FastNet:
    """The built-in fastnet-small (any image size: it pools globally)."""
    return FastNet(num_classes, in_channels, widths=SMALL_WIDTHS)


def fastnet_gpu(num_classes: int, image_size: int, in_channels: int) -> AirNet:
    """The built-in fastnet-gpu (any image size: it pools globally)."""
    return AirNet(num_classes, in_channels)
