"""Progress bars for long steps: images/s and ETA, quiet when disabled or not on a terminal."""

import contextlib
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
