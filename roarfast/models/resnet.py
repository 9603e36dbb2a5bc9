"""ResNets: `ResNet8` (CIFAR-style, 3 stages of one BasicBlock) and torchvision's resnet18/resnet50
adapted to the class count, the input channels and, for small images, a 3x3 stride-1 stem: the factories of
the built-ins resnet8, resnet18 and resnet50 (declared, with their recipes, in
roarfast.models.builtins.resnet).

Every ReLU is an nn.ReLU module that is not inplace (guided backprop hooks need the forward input).
"""

from functools import partial

from torch import nn

from roarfast.models.registry import SMALL_IMAGE


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with a residual connection (1x1 conv-BN projection when the shape changes)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu2 = nn.ReLU()
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_channels))

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        return self.relu2(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet8(nn.Module):
    """CIFAR ResNet-8: 3x3 stem, stages of one BasicBlock at widths (16, 32, 64) and strides (1, 2, 2),
    global average pool, linear head."""

    def __init__(self, num_classes: int, in_channels: int = 3, widths=(16, 32, 64)):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        self.layer1 = BasicBlock(widths[0], widths[0], 1)
        self.layer2 = BasicBlock(widths[0], widths[1], 2)
        self.layer3 = BasicBlock(widths[1], widths[2], 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[2], num_classes)
        self.cam_layer = "layer3"

    def forward(self, x):
        """x (Tensor[B, C, H, W]) normalized -> logits (Tensor[B, num_classes])."""
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(self.pool(x).flatten(1))


def no_inplace_relu(model: nn.Module) -> nn.Module:
    """Turns every inplace nn.ReLU of model into a plain one (a module reused twice stays one module)."""
    for module in model.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = False
    return model


def torchvision_resnet(name: str, num_classes: int, image_size: int = 224, in_channels: int = 3) -> nn.Module:
    """torchvision resnet18 / resnet50 (weights=None) with num_classes outputs; in_channels other than 3
    replace the stem conv; images of at most SMALL_IMAGE px get a 3x3 stride-1 stem and no max pool."""
    import torchvision

    model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    if image_size <= SMALL_IMAGE:
        model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    model.cam_layer = "layer4"
    return no_inplace_relu(model)


def resnet8(num_classes: int, image_size: int, in_channels: int) -> ResNet8:
    """The built-in resnet8 (any image size: it pools globally)."""
    return ResNet8(num_classes, in_channels)


resnet18 = partial(torchvision_resnet, "resnet18")
resnet50 = partial(torchvision_resnet, "resnet50")
