"""A user's own network and estimator, as roarfast imports them: `--model my_plugins:small_cnn` and
`--method my_plugins:input_x_gradient` from this folder (the working directory) or anywhere on PYTHONPATH.

Nothing here knows roarfast: a factory that builds a torch network and a function that explains one.
"""

from torch import nn


def small_cnn(num_classes: int, image_size: int, in_channels: int) -> nn.Module:
    """Two conv stages and a linear head: in_channels x image_size^2 images -> num_classes logits. The ReLUs
    are in place (roarfast runs them out of place for guided backprop); there is no cam_layer attribute, so
    Grad-CAM takes the last Conv2d."""
    return nn.Sequential(
        nn.Conv2d(in_channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


def input_x_gradient(model, images, target):
    """|input x gradient| of the explained logit (Shrikumar et al. 2016): Tensor[B, C, H, W].

    images: normalized float Tensor[B, C, H, W]; target: int64 Tensor[B] of the classes to explain; the model is
    in eval mode with frozen parameters, so the gradient reaches the input only."""
    x = images.clone().requires_grad_(True)
    model(x).gather(1, target[:, None]).sum().backward()
    return (x.grad * images).abs()
