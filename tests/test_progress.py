"""Progress where it is watched: a widget or a text bar in a Jupyter kernel (never tqdm's "IProgress not
found" warning), tqdm's bar on a terminal, plain lines without carriage returns in a log; durations as read."""

import io
import sys
import types
import warnings

import pytest

from roarfast.common import progress
from roarfast.common.progress import LogLines, bar_style, format_duration, progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture()
def no_kernel(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel.zmqshell", raising=False)


@pytest.fixture()
def kernel(monkeypatch):
    """This process looks like a Jupyter kernel."""
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))


def test_where_a_bar_goes(monkeypatch, no_kernel):
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert bar_style() == "terminal" and bar_style(enabled=False) == "off"
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert bar_style() == "log"


def test_a_kernel_without_ipywidgets_gets_a_text_bar_and_no_warning(monkeypatch, kernel):
    from tqdm import notebook

    monkeypatch.setattr(notebook, "IProgress", None)  # what tqdm.notebook holds when ipywidgets is missing
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert bar_style() == "notebook"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm.auto would warn here (TqdmWarning: IProgress not found)
        with progress_bar(total=200, desc="train fastnet") as bar:
            bar.update(200)
    assert "train fastnet: 100%" in err.getvalue() and "200/200" in err.getvalue()


def test_a_kernel_with_ipywidgets_gets_a_widget(monkeypatch, kernel):
    from tqdm import notebook

    monkeypatch.setattr(notebook, "IProgress", object)
    assert bar_style() == "widget"


def test_a_log_gets_a_plain_line_per_interval_and_one_at_the_end(monkeypatch, no_kernel):
    log = io.StringIO()
    bar = LogLines(total=1000, desc="train fastnet", unit="img", interval=0.0, file=log)
    bar.update(400)
    bar.set_postfix(loss="0.512")
    bar.clear()
    bar.refresh()
    bar.update(500)
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines[0].startswith("train fastnet: 400/1.00k img (40%)")
    assert lines[1].startswith("train fastnet: 900/1.00k img (90%)") and lines[1].endswith("loss=0.512]")
    assert len(lines) == 2  # closing after the last line adds none


def test_a_log_stays_quiet_for_a_step_shorter_than_its_interval(monkeypatch, no_kernel):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    with progress_bar(total=10, desc="extract test") as bar:
        assert isinstance(bar, LogLines)
        bar.update(10)
    assert log.getvalue() == ""


def test_a_log_line_after_the_interval(monkeypatch, no_kernel):
    log = io.StringIO()
    clock = iter([0.0, progress.LOG_INTERVAL_S + 1, progress.LOG_INTERVAL_S + 2, progress.LOG_INTERVAL_S + 3])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    bar = LogLines(total=10, desc="decode train", unit="img", file=log)
    bar.update(4)  # past the interval: a line
    bar.update(6)  # within the next interval: none, until the end
    bar.close()
    assert [line.split(" [")[0] for line in log.getvalue().splitlines()] == [
        "decode train: 4/10 img (40%)", "decode train: 10/10 img (100%)"]


@pytest.mark.parametrize("seconds, text", [(None, "unknown"), (0, "0s"), (0.43, "0.4s"), (42.4, "42s"),
                                           (185, "3m05s"), (7620, "2h07m")])
def test_durations(seconds, text):
    assert format_duration(seconds) == text
