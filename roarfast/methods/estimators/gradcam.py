"""Grad-CAM: ReLU(sum_k alpha_k A_k) at a conv layer, alpha_k = spatial mean of d logit / d A_k,
upsampled bilinearly to the input size."""

from roarfast.errors import UserError
from roarfast.methods.declaration import CONV_LAYER, register


@register("gradcam", "Grad-CAM at --cam-layer, upsampled to the input", reads=("gradcam_layer",), target_mode="own",
          requires=(CONV_LAYER,), order=4, cites=("selvaraju2017gradcam",))
def gradcam(model, batch, target, params):
    """Grad-CAM at params.gradcam_layer (default: model.cam_layer, else the last Conv2d) -> float32
    Tensor[B, 1, H, W]."""
    # late: loads torch, and the --method listing imports this module
    import torch
    import torch.nn.functional as F

    from roarfast.methods.model_context import cam_layer, logits_of, selected_logits

    layer = cam_layer(model, params.gradcam_layer)
    captured = []
    handle = layer.register_forward_hook(lambda module, inputs, output: captured.append(output))
    try:
        # The input needs a grad so that activations join the graph while the parameters are frozen.
        logits = logits_of(model, batch.x.detach().requires_grad_(True), params.autocast_dtype)
    finally:
        handle.remove()
    if len(captured) != 1 or not isinstance(captured[0], torch.Tensor) or captured[0].dim() != 4:
        raise UserError(f"Grad-CAM needs a layer called once per forward with a Tensor[B, K, h, w] output; "
                        f"{type(layer).__name__} gave {[getattr(c, 'shape', type(c)) for c in captured]}")
    activations = captured[0]
    (grads,) = torch.autograd.grad(selected_logits(logits, target), activations)
    alpha = grads.float().mean((2, 3), keepdim=True)
    cam = torch.relu((alpha * activations.detach().float()).sum(1, keepdim=True))
    return F.interpolate(cam, size=batch.x.shape[2:], mode="bilinear", align_corners=False)
