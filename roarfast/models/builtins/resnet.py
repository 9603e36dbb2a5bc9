"""resnet8, resnet18 and resnet50: the ResNets of roarfast.models.resnet and their recipes."""

from roarfast.models.registry import MODELS, SMALL_IMAGE, ModelEntry

#: the listing's place of this family: last
ORDER = 3
#: what the torchvision ResNets' descriptions add to their names
_TORCHVISION = f"(no pretrained weights), small-image stem up to {SMALL_IMAGE} px"

MODELS.register(ModelEntry(
    "resnet8", "CIFAR ResNet-8: 3 stages of one BasicBlock (16/32/64)", target="roarfast.models.resnet:resnet8",
    recipe={"epochs": 15, "batch_size": 128, "lr": 0.1}, order=ORDER, module=__name__))
MODELS.register(ModelEntry(
    "resnet18", f"torchvision ResNet-18 {_TORCHVISION}", target="roarfast.models.resnet:resnet18",
    recipe={"epochs": 15, "batch_size": 128, "lr": 0.1}, order=ORDER, module=__name__))
MODELS.register(ModelEntry(
    "resnet50", f"torchvision ResNet-50 {_TORCHVISION}", target="roarfast.models.resnet:resnet50",
    recipe={"epochs": 15, "batch_size": 64, "lr": 0.05}, order=ORDER, module=__name__))
