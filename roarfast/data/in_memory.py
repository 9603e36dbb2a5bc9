"""Whether an image tree's decoded canvases are held in memory or streamed from its files: a decision on the memory
available now. Imports nothing heavy: a kept answer makes the decision again before it is replayed
(roarfast.common.kept.checked)."""

import os
from pathlib import Path

from roarfast.common.kept import checkable
from roarfast.errors import UserError

#: share of the memory available at load time the decoded canvases may take before stream="auto" streams
IN_MEMORY_SHARE = 0.5


def available_memory() -> int:
    """Bytes of memory available to new allocations now (MemAvailable; free pages where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@checkable
def wants_stream(stream, images: int, crop: int) -> bool:
    """Whether to stream: stream=True/False decides; "auto" streams when the uint8 canvases of `images`
    images would take more than IN_MEMORY_SHARE of the available memory. stream=False for canvases larger than
    the available memory is refused before they are allocated."""
    if not isinstance(stream, bool) and stream != "auto":
        raise UserError(f"imagefolder: stream should be auto, true or false, got {stream!r}")
    need, available = images * 3 * crop * crop, available_memory()
    if stream is False and need > available:
        raise UserError(f"--data-option stream=false holds the canvases in memory: {images:,} images of "
                        f"3x{crop}x{crop} take {need / 2**30:.1f} GiB, more than the {available / 2**30:.1f} GiB "
                        f"available; stream=auto (or true) decodes them batch by batch")
    return stream if isinstance(stream, bool) else need > IN_MEMORY_SHARE * available
