"""The embedded default dataset (README, "The embedded dataset"): procedural 32x32 RGB images with known
ground truth: what the built-in dataset "embedded" (roarfast.data.builtin.embedded: its name, options and
defaults) generates.

Every image is smooth coloured noise plus random solid distractor shapes (the background), with one
8x8 object (or `copies` of it) pasted on top at a random position. All classes share the object's shape
and size; the class lives only in its content: one of five textures times one of two colour palettes.
The background is drawn from streams that never see the label, so once the object is removed nothing
about the class is left. Generation is vectorized over images and seeded: same seed, same bytes.
"""

import numpy as np
import torch

from roarfast.data.base import ImageSet
from roarfast.errors import UserError

#: image side in pixels
IMAGE_SIZE = 32
#: object side in pixels: every class has the same square object
OBJECT_SIZE = 8
#: textures of the object, each symmetric under a horizontal flip (up to swapping its two colours), so
#: flip augmentation keeps the class
TEXTURES = ("hstripes", "vstripes", "checker", "frame", "cross")
#: two palettes of two base colours each (RGB in [0, 1]); jittered per image, order swapped at random
PALETTES = (((0.90, 0.15, 0.10), (0.95, 0.85, 0.20)),  # warm: red / yellow
            ((0.10, 0.25, 0.90), (0.20, 0.90, 0.90)))  # cool: blue / cyan
CLASSES = [f"{texture}-{name}" for name in ("warm", "cool") for texture in TEXTURES]
#: per-channel uniform jitter of the object's colours: variety without crossing into the other palette
COLOUR_JITTER = 0.08
#: the background's smooth noise: a coarse grid of random colours upsampled bilinearly
NOISE_GRID = 4
NOISE_RANGE = (0.15, 0.85)
#: fine per-pixel grain on top of the smooth noise (std, [0, 1] units)
GRAIN_STD = 0.03
#: distractors per image: at most this many, each present with DISTRACTOR_P, side in [3, 8] px
MAX_DISTRACTORS = 4
DISTRACTOR_P = 0.75
DISTRACTOR_SIDES = (3, 8)
#: copies of the object go into distinct cells of a 3x3 grid of 10 px cells so they never overlap
COPY_CELL = 10
MAX_COPIES = 9

#: the most images of a split: a split is generated at once, about 65 KB of float intermediates an image
#: (100,000 images: about 7 GB)
MAX_IMAGES = 100_000

# independent random streams: the label stream never feeds the background
_STREAM_LABELS, _STREAM_BACKGROUND, _STREAM_OBJECTS = 0, 1, 2


def _generator(seed: int, split: int, stream: int) -> torch.Generator:
    """A torch CPU generator for one (seed, split, stream), seeds spread by numpy's SeedSequence."""
    state = np.random.SeedSequence([seed, split, stream]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


def _uniform(gen, *shape, low=0.0, high=1.0):
    return torch.rand(*shape, generator=gen) * (high - low) + low


def background(n: int, gen: torch.Generator) -> torch.Tensor:
    """Label-free clutter: smooth colour noise, grain, solid squares and discs -> float Tensor[n, 3, 32, 32]
    in [0, 1]."""
    coarse = _uniform(gen, n, 3, NOISE_GRID, NOISE_GRID, low=NOISE_RANGE[0], high=NOISE_RANGE[1])
    img = torch.nn.functional.interpolate(coarse, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False)
    img = img + GRAIN_STD * torch.randn(n, 3, IMAGE_SIZE, IMAGE_SIZE, generator=gen)
    yy = torch.arange(IMAGE_SIZE).view(1, IMAGE_SIZE, 1)
    xx = torch.arange(IMAGE_SIZE).view(1, 1, IMAGE_SIZE)
    for _ in range(MAX_DISTRACTORS):
        present = torch.rand(n, generator=gen) < DISTRACTOR_P
        side = torch.randint(DISTRACTOR_SIDES[0], DISTRACTOR_SIDES[1] + 1, (n,), generator=gen)
        top = (torch.rand(n, generator=gen) * (IMAGE_SIZE - side + 1)).long()
        left = (torch.rand(n, generator=gen) * (IMAGE_SIZE - side + 1)).long()
        disc = torch.rand(n, generator=gen) < 0.5
        colour = torch.rand(n, 3, generator=gen)
        s, t, l = side.view(n, 1, 1), top.view(n, 1, 1), left.view(n, 1, 1)
        square = (yy >= t) & (yy < t + s) & (xx >= l) & (xx < l + s)
        centre_y, centre_x = t + (s - 1) / 2, l + (s - 1) / 2
        round_ = (yy - centre_y) ** 2 + (xx - centre_x) ** 2 <= (s / 2) ** 2
        shape = torch.where(disc.view(n, 1, 1), round_, square) & present.view(n, 1, 1)
        img = torch.where(shape.unsqueeze(1), colour.view(n, 3, 1, 1), img)
    return img.clamp_(0.0, 1.0)


def texture_masks() -> torch.Tensor:
    """bool Tensor[len(TEXTURES), 8, 8]: where each texture takes its first colour."""
    y = torch.arange(OBJECT_SIZE).view(OBJECT_SIZE, 1)
    x = torch.arange(OBJECT_SIZE).view(1, OBJECT_SIZE)
    edge = torch.minimum(torch.minimum(y, x), torch.minimum(OBJECT_SIZE - 1 - y, OBJECT_SIZE - 1 - x))
    middle = OBJECT_SIZE // 2
    masks = {
        "hstripes": (y % 2 == 0).expand(OBJECT_SIZE, OBJECT_SIZE),
        "vstripes": (x % 2 == 0).expand(OBJECT_SIZE, OBJECT_SIZE),
        "checker": (y + x) % 2 == 0,
        "frame": edge < 2,
        "cross": ((y >= middle - 1) & (y <= middle)) | ((x >= middle - 1) & (x <= middle)),
    }
    return torch.stack([masks[name] for name in TEXTURES])


def objects(labels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """The object of each label's class, colours jittered and randomly ordered -> float Tensor[n, 3, 8, 8]."""
    n = labels.shape[0]
    texture = labels % len(TEXTURES)
    palette = torch.tensor(PALETTES)[labels // len(TEXTURES)]  # [n, 2, 3]
    palette = (palette + _uniform(gen, n, 2, 3, low=-COLOUR_JITTER, high=COLOUR_JITTER)).clamp(0.0, 1.0)
    swap = torch.rand(n, generator=gen) < 0.5
    first = torch.where(swap.view(n, 1), palette[:, 1], palette[:, 0])
    second = torch.where(swap.view(n, 1), palette[:, 0], palette[:, 1])
    where_first = texture_masks()[texture].unsqueeze(1)  # [n, 1, 8, 8]
    return torch.where(where_first, first.view(n, 3, 1, 1), second.view(n, 3, 1, 1))


def object_positions(n: int, copies: int, gen: torch.Generator) -> torch.Tensor:
    """Top-left corners int64 Tensor[n, copies, 2]: anywhere for one copy, distinct grid cells for several."""
    if copies == 1:
        return torch.randint(0, IMAGE_SIZE - OBJECT_SIZE + 1, (n, 1, 2), generator=gen)
    cells_per_side = IMAGE_SIZE // COPY_CELL
    cell = torch.rand(n, cells_per_side ** 2, generator=gen).argsort(dim=1)[:, :copies]
    corner = torch.stack([cell // cells_per_side, cell % cells_per_side], dim=-1) * COPY_CELL
    return corner + torch.randint(0, COPY_CELL - OBJECT_SIZE + 1, (n, copies, 2), generator=gen)


def paste(canvas: torch.Tensor, obj: torch.Tensor, positions: torch.Tensor):
    """Pastes obj (Tensor[n, 3, 8, 8]) onto canvas (Tensor[n, 3, 32, 32]) at every position; returns
    (images, masks (bool Tensor[n, 32, 32]) of the object pixels)."""
    n = canvas.shape[0]
    yy = torch.arange(IMAGE_SIZE).view(1, IMAGE_SIZE, 1)
    xx = torch.arange(IMAGE_SIZE).view(1, 1, IMAGE_SIZE)
    masks = torch.zeros(n, IMAGE_SIZE, IMAGE_SIZE, dtype=torch.bool)
    rows = torch.arange(n).view(n, 1, 1)
    for c in range(positions.shape[1]):
        top, left = positions[:, c, 0].view(n, 1, 1), positions[:, c, 1].view(n, 1, 1)
        inside = (yy >= top) & (yy < top + OBJECT_SIZE) & (xx >= left) & (xx < left + OBJECT_SIZE)
        # object pixel under each canvas pixel (clamped outside; only `inside` is used)
        oy = (yy - top).clamp(0, OBJECT_SIZE - 1).expand(n, IMAGE_SIZE, IMAGE_SIZE)
        ox = (xx - left).clamp(0, OBJECT_SIZE - 1).expand(n, IMAGE_SIZE, IMAGE_SIZE)
        placed = obj[rows, :, oy, ox].permute(0, 3, 1, 2)  # [n, 3, 32, 32]
        canvas = torch.where(inside.unsqueeze(1), placed, canvas)
        masks |= inside
    return canvas, masks


def make_split(n: int, seed: int, split: int, copies: int) -> ImageSet:
    """n images of one split (0 = train, 1 = test): balanced labels in random order."""
    labels_gen = _generator(seed, split, _STREAM_LABELS)
    labels = (torch.arange(n) % len(CLASSES))[torch.randperm(n, generator=labels_gen)]
    canvas = background(n, _generator(seed, split, _STREAM_BACKGROUND))
    object_gen = _generator(seed, split, _STREAM_OBJECTS)
    positions = object_positions(n, copies, object_gen)
    images, masks = paste(canvas, objects(labels, object_gen), positions)
    pixels = (images * 255.0).round_().to(torch.uint8)
    return ImageSet(images=pixels, labels=labels, masks=masks, classes=list(CLASSES))


def generate(num_train: int, num_test: int, seed: int, copies: int):
    """(train, test) ImageSets of the embedded dataset; masks = the object pixels."""
    check_options(num_train, num_test, seed, copies)
    return make_split(num_train, seed, 0, copies), make_split(num_test, seed, 1, copies)


def outline(num_train: int, num_test: int, seed: int, copies: int):
    """What generate would make, without making it: ((C, H, W), train images, test images, classes, whether it
    has ground-truth masks)."""
    check_options(num_train, num_test, seed, copies)
    return (3, IMAGE_SIZE, IMAGE_SIZE), num_train, num_test, len(CLASSES), True


def check_options(num_train, num_test, seed, copies) -> None:
    for name, value in (("num_train", num_train), ("num_test", num_test)):
        if isinstance(value, bool) or not isinstance(value, int) or not len(CLASSES) <= value <= MAX_IMAGES:
            raise UserError(f"--data-option {name} should be an int in [{len(CLASSES)}, {MAX_IMAGES}] (at least one "
                            f"image per class; at most what generating in memory allows), got {value!r}")
    if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
        raise UserError(f"--data-option copies should be an int in [1, {MAX_COPIES}], got {copies!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"--data-option seed should be a non-negative int, got {seed!r}")
