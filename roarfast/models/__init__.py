"""Classifier architectures: the built-ins by name (build_model("fastnet" | "fastnet-gpu" | "airbench" |
"resnet8" | "resnet18" | "resnet50")) and every form --model takes (resolve_model: built-in, package.module:factory,
timm:<name>, a Python object; roarfast.models.spec).

Light on purpose (torch is imported where a network is built): the CLI builds its --model help from here.
"""

from roarfast.models.spec import ModelSpec, model_forms, resolve_model

#: model names and what they are
MODELS = {
    "fastnet": "CPU default for 32px data: 3 conv stages (16/32/64), about 3 M multiply-adds per image",
    "fastnet-gpu": "GPU default for 33-64 px data: airbench-shaped net (64/256/256) with a learned stem, ReLU",
    "airbench": "GPU default for 32px data: airbench94's net (frozen whitening stem from the training patches, "
                "identity-initialized convs, 64/256/256), ReLU; trains with airbench's recipe",
    "resnet8": "CIFAR ResNet-8: 3 stages of one BasicBlock (16/32/64)",
    "resnet18": "torchvision ResNet-18 (no pretrained weights), small-image stem up to 64 px",
    "resnet50": "torchvision ResNet-50 (no pretrained weights), small-image stem up to 64 px",
}


def build_model(name: str, num_classes: int, image_size: int = 32, in_channels: int = 3):
    """A freshly initialized classifier taking normalized Tensor[B, in_channels, H, W] to logits
    Tensor[B, num_classes]. Every model has `cam_layer` (dotted name of its last conv stage) and
    uses nn.ReLU modules that are not inplace."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes should be an int >= 2, got {num_classes!r}")
    if isinstance(in_channels, bool) or not isinstance(in_channels, int) or in_channels < 1:
        raise ValueError(f"in_channels should be a positive int, got {in_channels!r}")
    if name == "fastnet":
        from roarfast.models.fastnet import FastNet

        return FastNet(num_classes, in_channels)
    if name == "fastnet-gpu":
        from roarfast.models.fastnet import AirNet

        return AirNet(num_classes, in_channels)
    if name == "airbench":
        from roarfast.models.airbench import airbench

        return airbench(num_classes, image_size, in_channels)
    if name == "resnet8":
        from roarfast.models.resnet import ResNet8

        return ResNet8(num_classes, in_channels)
    if name in ("resnet18", "resnet50"):
        from roarfast.models.resnet import torchvision_resnet

        return torchvision_resnet(name, num_classes, image_size, in_channels)
    raise ValueError(f"model should be one of {', '.join(MODELS)}, got {name!r}")


__all__ = ["MODELS", "ModelSpec", "build_model", "model_forms", "resolve_model"]
