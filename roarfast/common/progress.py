"""Progress bars for long steps (images/s and ETA) wherever they are watched, and durations as people read them.

Where a bar goes is decided when it starts (bar_style): a Jupyter kernel gets a widget when ipywidgets is
installed, else tqdm's text bar (the notebook redraws it in place); a terminal gets tqdm's bar on stderr; a
log (stderr piped or redirected, as in CI) gets a plain line every LOG_INTERVAL_S (and one when such a step
ends), never carriage returns. tqdm.auto is not used: in a kernel without ipywidgets it warns (TqdmWarning
"IProgress not found") where a text bar does the job.
"""

import contextlib
import math
import sys
import time

#: seconds between two lines of a bar written to a log
LOG_INTERVAL_S = 15.0
#: seconds between two redraws of a text bar in a notebook (each redraw is kept in the cell's output)
NOTEBOOK_INTERVAL_S = 0.5


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "img", enabled: bool = True):
    """A bar of `total` units (rate in unit/s, ETA) styled for where it is watched (bar_style); silent when
    `enabled` is false. Yields an object with tqdm's update, set_postfix, clear and refresh."""
    bar = _make_bar(bar_style(enabled), total, desc, unit)
    try:
        yield bar
    finally:
        bar.close()


def bar_style(enabled: bool = True) -> str:
    """"off", "widget" (a Jupyter kernel with ipywidgets), "notebook" (a kernel without), "terminal" (stderr
    is a TTY) or "log" (anything else: a file, a pipe)."""
    if not enabled:
        return "off"
    if in_notebook():
        return "widget" if _widget_bar() is not None else "notebook"
    return "terminal" if sys.stderr.isatty() else "log"


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (its output shown in a notebook's cells)."""
    return "ipykernel.zmqshell" in sys.modules


def _widget_bar():
    """tqdm's notebook bar class, or None when ipywidgets is missing (tqdm would then warn and fail)."""
    try:
        from tqdm import notebook
    except ImportError:
        return None
    return notebook.tqdm if notebook.IProgress is not None else None


def _make_bar(style: str, total: int, desc: str, unit: str):
    from tqdm.std import tqdm

    # 13.5k images read better than 13500, but 3 cells than 3.00
    common = dict(total=total, desc=desc, unit=unit, unit_scale=total >= 1000)
    if style == "off":
        return tqdm(disable=True, **common)
    if style == "widget":
        return _widget_bar()(leave=True, **common)
    if style == "notebook":  # kept in the cell when done, so the notebook shows what the step took
        return tqdm(file=sys.stderr, leave=True, mininterval=NOTEBOOK_INTERVAL_S, ncols=100, **common)
    if style == "terminal":
        return tqdm(file=sys.stderr, leave=False, dynamic_ncols=True, **common)
    return LogLines(total, desc, unit)


class LogLines:
    """A progress bar for logs: a line on stderr every `interval` seconds ("train fastnet: 4.50k/13.5k img
    (33%) [00:15<00:30, 300img/s]") and, after those, one at the end; tqdm's bar methods."""

    _FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%) [{elapsed}<{remaining}, {rate_fmt}{postfix}]"

    def __init__(self, total: int, desc: str, unit: str, interval: float = LOG_INTERVAL_S, file=None):
        self.total, self.desc, self.unit, self.interval = total, desc, unit, interval
        self.file = file if file is not None else sys.stderr
        self.n = 0
        self.postfix = ""
        self.started = self._last = time.monotonic()
        self._written = 0  # n at the last line written
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._write(now)

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{key}={value}" for key, value in values.items())

    def clear(self) -> None:
        """Nothing to clear: a log's lines stay."""

    def refresh(self) -> None:
        """Lines are written on update, at the interval."""

    def close(self) -> None:
        if not self._closed and 0 < self._written != self.n:  # a step shorter than the interval stays silent
            self._write(time.monotonic())
        self._closed = True

    def _write(self, now: float) -> None:
        from tqdm.std import tqdm

        line = tqdm.format_meter(self.n, self.total, now - self.started, prefix=self.desc, unit=self.unit,
                                 unit_scale=self.total >= 1000, postfix=self.postfix or None, bar_format=self._FORMAT)
        print(line, file=self.file, flush=True)
        self._written = self.n


def format_duration(seconds: float | None) -> str:
    """0.4s, 42s, 3m05s, 2h07m; "unknown" for None (no rate measured yet)."""
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    if 0 < seconds < 9.95:  # a cell of a small study takes a fraction of a second: "0s" would say nothing
        return f"{seconds:.1f}s"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
