"""Choice of the torch device from the CLI's --device (auto | cpu | cuda | cuda:N)."""

from roarfast.errors import UserError


def resolve_device(name: str = "auto"):
    import torch

    if name in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device should be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name} asked for a GPU but torch sees none (roarfast doctor shows what it sees)")
    return device
