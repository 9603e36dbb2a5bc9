"""The built-in dataset imagefolder: a JPEG tree in ImageFolder layout, decoded to a center-cropped canvas by
roarfast.data.imagefolder."""

from roarfast.data.registry import register_dataset


def outline_imagefolder(data_dir, resize: int | None = None, crop: int | None = None, skip_bad: bool = False,
                        device: str = "auto", test_split: str | None = None, batch_size: int | None = None,
                        stream="auto", subset=None):
    """What load_imagefolder would load, from the tree's listing and the images' headers (no image decoded):
    ((C, H, W) of the canvas, train images, test images, classes, whether it has ground-truth masks: never)."""
    # late: the listing loads torch, and every --help lists this dataset
    from roarfast.data.imagefolder import outline_tree

    return outline_tree(data_dir, resize, crop, skip_bad, device, test_split, batch_size, stream, subset)


# device, batch_size and stream say how the tree is decoded, not what it holds: the fingerprint leaves them out
@register_dataset("imagefolder", "JPEG tree --data-dir/{train,val|test}/<class>/*.jpg, decoded by DALI to a "
                  "center-cropped canvas", outline=outline_imagefolder, read_options=("device", "batch_size", "stream"),
                  order=2)
def load_imagefolder(data_dir, resize: int | None = None, crop: int | None = None, skip_bad: bool = False,
                     device: str = "auto", test_split: str | None = None, batch_size: int | None = None,
                     stream="auto", subset=None):
    """(train, test) splits of the tree at data_dir: data_dir/train and data_dir/<test_split> (default: val,
    else test), canvas = shorter side resized to `resize`, center `crop` x `crop`; what is not given keeps the
    images' own size when every image kept shares one, else the ImageNet canvas (roarfast.data.canvas).

    skip_bad: log and drop images that cannot be decoded instead of failing with their names.
    device: "auto", "cpu" or "gpu" (DALI's mixed decoder on the current CUDA device); without DALI, "auto" and
        "cpu" decode on the CPU with PIL and torchvision (roarfast.data.decode).
    batch_size: images per decode batch (default: by canvas size, roarfast.data.imagefolder.default_batch_size).
    stream: True keeps the splits on disk (FileSets, decoded batch by batch by the StreamLoader), False
        decodes them into memory (ImageSets, the canvases cached: roarfast.data.canvas_cache), "auto" streams
        when the canvases would not fit (roarfast.data.in_memory.wants_stream).
    subset: the dataset resolver's stratified subset (roarfast.data.subset.Subset, num_train / num_test),
        chosen from the listing so that only the files it keeps are read.
    """
    # late: decoding loads torch (and DALI), and every --help lists this dataset
    from roarfast.data.imagefolder import load_tree

    return load_tree(data_dir, resize, crop, skip_bad, device, test_split, batch_size, stream, subset)
