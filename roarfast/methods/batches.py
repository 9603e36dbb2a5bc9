"""The compute batch: how many images an extraction's estimators take at once, one size per rank store, so that
the bytes a store holds do not depend on how its work was cut.

Floating-point kernels pick their algorithm by the shape they are given (oneDNN on a CPU takes another convolution
for a batch of one image than for a batch of 256; cuDNN likewise), so an image's map can differ in its last bits with
the batch it was computed in, and a max pool or a ReLU turns such a bit into other ranks: on the embedded test split,
grad's ranks of 117 of 1,000 images changed between batches of 256 and of 3 (a chunk of 7 ends in a batch of one),
ig's of 7 between batches of 256 and of 50 (docs/concepts/determinism.md). So every estimator computes its maps in
batches of `compute_batch` images aligned to image indices: batch k holds the split's images [k*B, (k+1)*B), the
last one what is left. A new store's chunks hold whole batches (`whole_batches`), and --batch-size only says how many
of them a pass reads at once.

The compute batch is the device kind's default --batch-size for the image size (what earlier releases computed a
default cut in, so its ranks keep their bytes), or the one a request sets (--compute-batch, ExtractOptions'
`compute_batch`: smaller for memory, larger for speed), which is then part of the ranks' identity
(Selection.ranks_identity), so stores of other compute batches never share an id.
"""

from roarfast.common.device import default_batch_size


def compute_batch(selection, device, image_size: int) -> int:
    """The images per compute batch of `selection`'s estimators (a Selection) on `device` (a torch.device: its kind
    decides the default) for images of `image_size` pixels a side."""
    return selection.compute_batch or default_batch_size(device, image_size)


def whole_batches(images: int, batch: int) -> int:
    """`images` rounded up to a multiple of `batch`: a chunk or a pass of whole compute batches."""
    return -(-images // batch) * batch
