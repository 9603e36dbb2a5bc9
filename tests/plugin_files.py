"""What the plug-in tests bring as a user would: a module of their own (written into a temporary folder and
imported from there) with a small CNN factory, dataset factories (a tensor pair, a torch Dataset of PIL
images) and an estimator, plus broken variants of each; and a snapshot of a run directory's files, to
check that a refused command wrote nothing."""

import itertools
import textwrap
from pathlib import Path

#: the user's module; SIDE x SIDE images, four classes told apart by the brightness of a centre square
MODULE = textwrap.dedent('''
    import torch
    from PIL import Image
    from torch import nn

    SIDE = 8


    def small_cnn(num_classes, image_size, in_channels):
        return nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                             nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveMaxPool2d(1),
                             nn.Flatten(), nn.Linear(8, num_classes))


    def gelu_cnn(num_classes, image_size, in_channels):
        return nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.GELU(), nn.AdaptiveMaxPool2d(1),
                             nn.Flatten(), nn.Linear(8, num_classes))


    def tensors(n_train=48, n_test=24, channels=3, seed=0):
        generator = torch.Generator().manual_seed(seed)

        def split(n):
            labels = torch.arange(n) % 4
            images = torch.randint(0, 60, (n, channels, SIDE, SIDE), generator=generator, dtype=torch.uint8)
            images[:, :, 2:6, 2:6] += (60 * labels).to(torch.uint8).view(-1, 1, 1, 1)
            return images, labels

        return split(n_train), split(n_test), ["dark", "dim", "bright", "white"]


    class PilSplit(torch.utils.data.Dataset):
        def __init__(self, images, labels):
            self.images, self.labels = images, labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            pixels = self.images[i].permute(1, 2, 0).numpy()
            return Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels), int(self.labels[i])


    def pil_images(n_train=48, n_test=24, channels=3, seed=0):
        (a, b), (c, d), classes = tensors(n_train, n_test, channels, seed)
        return PilSplit(a, b), PilSplit(c, d), classes


    def saliency(model, images, target):
        x = images.clone().requires_grad_(True)
        model(x).gather(1, target[:, None]).sum().backward()
        return (x.grad * images).abs()


    def not_a_module(num_classes, image_size, in_channels):
        return "a cnn"


    def wrong_logits(num_classes, image_size, in_channels):
        return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * image_size * image_size, num_classes + 1))


    def float_images():
        (a, b), (c, d), _ = tensors()
        return (a.float() / 255, b), (c.float() / 255, d)


    def flat_images():
        (a, b), (c, d), _ = tensors()
        return (a.flatten(1), b), (c.flatten(1), d)


    def labels_out_of_range():
        (a, b), (c, d), classes = tensors()
        return (a, b + 2), (c, d), classes


    def cropped_maps(model, images, target):
        return images[:, :, :4]


    def nan_maps(model, images, target):
        return images * float("nan")
''')
_COUNT = itertools.count()


def write_module(folder: Path, monkeypatch, extra: str = "") -> str:
    """Writes MODULE (plus `extra` source) as a fresh module in `folder`, puts the folder on sys.path and
    returns the module's name (unique per call, so no test sees another's cached module)."""
    name = f"user_plugins_{next(_COUNT)}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(MODULE + extra)
    monkeypatch.syspath_prepend(str(folder))
    return name


def snapshot(root: Path) -> dict:
    """{relative path: (size, mtime_ns)} of every file under root ({} when it does not exist)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}
