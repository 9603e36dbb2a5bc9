"""Progress bars for long steps (images/s and ETA, quiet when disabled or not on a terminal) and durations
as people read them."""

import contextlib
import math
import sys


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "img", enabled: bool = True):
    """A tqdm bar (rate in unit/s, ETA) that is silent when `enabled` is false or stderr is no TTY."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True, dynamic_ncols=True, leave=False,
               disable=not enabled or not sys.stderr.isatty())
    try:
        yield bar
    finally:
        bar.close()


def format_duration(seconds: float | None) -> str:
    """42s, 3m05s, 2h07m; "unknown" for None (no rate measured yet)."""
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
