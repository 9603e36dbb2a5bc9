"""The report's sections: one registered from outside (its numbers, a table and a figure) found on every page
at the place its order gives it, and none overwriting another's numbers; the sections beyond retraining: the
no-retrain measurements in a table, the Kendall tau between benchmarks computed by hand, fill leakage (from
results.sqlite, and from a leakage.json of before schema v3) beside the class controls."""

import json
from collections import Counter

import pytest

from roarfast.report import sections, write_report
from roarfast.report.figures import pyplot
from roarfast.report.sections import Figure, Table
from roarfast.common.resolver import Resolver
from roarfast.results import FILL_LEAKAGE, NO_RETRAIN, RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

HASH = "e" * 64
#: three estimators whose ROAR order (a best) MoRF agrees with fully and LeRF reverses fully
ROAR = {"a": 0.2, "b": 0.5, "random": 0.8}
MORF = {"a": 0.1, "b": 0.3, "random": 0.6}
LERF = {"a": 0.4, "b": 0.6, "random": 0.9}  # LeRF: higher is better, so this is the reverse of ROAR's order


def record(db, kind, method, mode, fill, acc, seed=0, config_hash=HASH, **extra):
    model = "detector" if kind == FILL_LEAKAGE else "fastnet"
    db.record(MeasurementKey(kind, "embedded", model, method, mode, fill, 0.5, seed, config_hash),
              {"test_acc": acc, "val_acc": None if kind != RETRAIN else acc, "epochs": 0, "seconds": 1.0,
               "versions": {}, **extra})


def fill_run(run) -> None:
    with ResultsDB(run.results_path) as db:
        for method in ROAR:
            for seed in range(2):
                record(db, RETRAIN, method, "roar", "dataset-mean", ROAR[method], seed)
                record(db, RETRAIN, method, "roar", "road", 0.5, seed, "f" * 64)  # another fill: not in the agreement
            record(db, NO_RETRAIN, method, "morf", "dataset-mean", MORF[method], None,
                   mean_probability=MORF[method] / 2)
            record(db, NO_RETRAIN, method, "lerf", "dataset-mean", LERF[method], None, mean_probability=0.9)


def test_a_rank_agreement_over_two_methods_is_not_shown_as_a_finding(tmp_path):
    run = RunDir(tmp_path)
    with ResultsDB(run.results_path) as db:
        for method in ("a", "random"):  # two methods: any two rankings agree or disagree fully
            for seed in range(2):
                record(db, RETRAIN, method, "roar", "dataset-mean", ROAR[method], seed)
            record(db, NO_RETRAIN, method, "morf", "dataset-mean", MORF[method], None, mean_probability=0.5)
    summary = write_report(tmp_path).summary
    (entry,) = summary["no_retrain"]["agreement"]
    assert (entry["a"], entry["b"], entry["methods"], entry["finding"]) == ("roar", "morf", 2, False)
    markdown = (run.report_dir / "index.md").read_text()
    assert "| ROAR | MORF | not shown: over 2 method(s), at least 3 are needed" in markdown and "+1.00" not in markdown


def test_no_retrain_table_agreement_and_fill_leakage_are_reported(tmp_path):
    run = RunDir(tmp_path)
    fill_run(run)
    with ResultsDB(run.results_path) as db:
        record(db, FILL_LEAKAGE, "random", "detect", "dataset-mean", 0.99, base_rate=0.5)
        record(db, FILL_LEAKAGE, "random", "detect", "road", 0.61, base_rate=0.5)
    summary = write_report(tmp_path).summary
    tau = {(e["a"], e["b"]): e["tau"] for e in summary["no_retrain"]["agreement"]}
    assert tau[("roar", "morf")] == 1.0 and tau[("roar", "lerf")] == -1.0 and tau[("morf", "lerf")] == -1.0
    assert all(e["finding"] and e["methods"] == 3 for e in summary["no_retrain"]["agreement"])
    cell = next(c for c in summary["no_retrain"]["cells"] if c["method"] == "a")
    assert cell["modes"]["morf"] == {"test_acc": 0.1, "mean_probability": 0.05}
    assert not any("morf" in note or "detect" in note for note in summary["notes"])
    assert summary["fill_leakage"] == [
        {"method": "random", "fill": "dataset-mean", "fraction": 0.5, "accuracy": 0.99, "base_rate": 0.5},
        {"method": "random", "fill": "road", "fraction": 0.5, "accuracy": 0.61, "base_rate": 0.5}]
    markdown = (run.report_dir / "index.md").read_text()
    assert "Kendall tau-b" in markdown and "| ROAR | LERF | -1.00 |" in markdown
    assert "| random | road | 50% | 61.0% | 50.0% |" in markdown
    assert "No retraining" in (run.report_dir / "index.html").read_text()


def test_a_leakage_json_of_before_v3_is_still_reported(tmp_path):
    run = RunDir(tmp_path)
    fill_run(run)
    run.legacy_fill_leakage_path.write_text(json.dumps(
        [{"method": "random", "fill": "road", "fraction": 0.5, "accuracy": 0.61, "base_rate": 0.5}]))
    write_report(tmp_path)
    assert "| random | road | 50% | 61.0% | 50.0% |" in (run.report_dir / "index.md").read_text()
    assert run.legacy_fill_leakage_path.exists()  # read, not moved: the report writes nothing beside results


def test_cells_trained_with_different_thread_counts_are_noted(tmp_path):
    """CPU accuracies depend on the thread count (issue 18, item 12): a report over cells trained with 1 and
    with 2 threads says so; one over cells of one count, or of counts never recorded, does not."""
    from roarfast.report.load import load_run

    def threads_note(counts) -> list:
        run = RunDir(tmp_path / "-".join(map(str, counts)))
        with ResultsDB(run.results_path) as db:
            for seed, threads in enumerate(counts):
                for method in ("random", "a"):
                    record(db, RETRAIN, method, "roar", "dataset-mean", 0.5, seed, threads=threads)
        (part,) = load_run(run).parts
        return [note for note in part.notes if "thread" in note]

    (note,) = threads_note([1, 1, 2])
    assert note.startswith("the cells were trained with different CPU thread counts (1 thread: 4 cell(s), 2 threads: "
                           "2 cell(s)); CPU accuracies depend on the thread count")
    assert threads_note([2, 2]) == [] and threads_note([None, 2]) == []


@pytest.fixture
def own_sections(monkeypatch):
    """The built-in sections in a resolver of the test's own, so that what a test registers ends with it."""
    monkeypatch.setattr(sections, "SECTIONS", Resolver("report section", "section", list(sections.SECTIONS)))


def cells_per_method(loaded, summary):
    return {"probe": dict(Counter(c["method"] for c in loaded.cells))}


def probe_table(summary):
    return [Table("Probe: cells per method", ["method", "cells"], sorted(summary["probe"].items()))]


def probe_figures(summary, context, run):
    def bars(width):
        fig, ax = pyplot().subplots(figsize=(width, 2))
        ax.bar(list(summary["probe"]), list(summary["probe"].values()), color="tab:blue")
        return fig

    return [Figure("probe.png", "Probe: a bar per method", bars),
            Figure("nothing.png", "Never drawn", lambda width: None)]


def test_a_section_registered_in_one_place_is_on_every_page(tmp_path, own_sections):
    """What a new section module does (numbers, a table, a figure, an order between the control tables and the
    test accuracy tables), done from the test: summary.json, index.md and index.html show it, in its place."""
    import matplotlib.image as mpimg

    sections.register("probe", "cells per method", 65, numbers=cells_per_method, blocks=probe_table,
                      figures=probe_figures)
    run = RunDir(tmp_path)
    fill_run(run)
    report = write_report(tmp_path)
    # fill_run: per method 2 seeds with each of 2 fills
    assert report.summary["probe"] == {"a": 4, "b": 4, "random": 4}
    assert json.loads((run.report_dir / "summary.json").read_text())["probe"] == {"a": 4, "b": 4, "random": 4}
    (probe,) = [f for f in report.summary["figures"] if f["kind"] == "probe"]
    assert (probe["file"], probe["files"], probe["title"]) == ("probe.png", ["probe.png"], "Probe: a bar per method")
    assert "probe.png" in report.files and not (run.report_dir / "nothing.png").exists()
    image = mpimg.imread(run.report_dir / "probe.png")
    assert image.shape[0] > 100 and (image[..., 2] - image[..., 0] > 0.4).mean() > 0.05  # the blue bars are drawn
    markdown = (run.report_dir / "index.md").read_text()
    table = markdown.index("## Probe: cells per method")
    assert markdown.index("Verdict against random, ") < table < markdown.index("## Test accuracy, ROAR")
    assert markdown[table:].startswith("## Probe: cells per method\n\n| method | cells |\n|---|---|\n| a | 4 |\n"
                                       "| b | 4 |\n| random | 4 |\n\n## Probe: a bar per method\n\n"
                                       "![Probe: a bar per method](probe.png)\n")
    assert "Never drawn" not in markdown
    page = (run.report_dir / "index.html").read_text()
    assert "<h2>Probe: cells per method</h2><table>" in page and "<td>random</td><td>4</td>" in page
    assert "<img alt='Probe: a bar per method' src='data:image/png;base64," in page


def test_a_section_cannot_overwrite_anothers_numbers(tmp_path, own_sections):
    sections.register("usurper", "sets the verdicts again", 5, numbers=lambda loaded, summary: {"verdicts": []})
    fill_run(RunDir(tmp_path))
    with pytest.raises(ValueError, match="report section 'usurper' sets \\['verdicts'\\]"):
        write_report(tmp_path)


def test_a_section_s_blocks_are_tables_or_lines():
    from roarfast.report.render import page
    from roarfast.report.sections import Section

    with pytest.raises(TypeError, match="report section 'loose' gave str: blocks are Table or Lines"):
        page([Section("loose", blocks=lambda summary: ["a line outside Lines"])], {}, {})


def test_with_several_configurations_a_block_the_same_in_each_comes_once_and_the_others_per_configuration():
    """A table of the whole run's measurements (the no-retrain evaluations) is not repeated under every
    configuration's label; what differs between configurations is shown under each label, in turn."""
    from roarfast.report.render import Image, page
    from roarfast.report.sections import Lines, Section

    run_wide = Table("measured once for the run", ["a"], [["1"]])
    summary = {"configurations": [{"configuration": {"label": "A"}, "own": "x"},
                                  {"configuration": {"label": "B"}, "own": "y"}]}
    section = Section("mixed", blocks=lambda part: [run_wide, Lines("per configuration", [part["own"]])])
    shown = {"mixed": [{"file": "a.png", "title": "A's", "configuration": "A"},
                       {"file": "b.png", "title": "B's", "configuration": "B"}]}
    blocks = page([section], summary, shown)
    assert blocks == [run_wide, Lines("[A] per configuration", ["x"]), Image("a.png", "A's"),
                      Lines("[B] per configuration", ["y"]), Image("b.png", "B's")]
    differing = Section("apart", blocks=lambda part: [Table("t", ["a"], [[part["own"]]])])
    assert [b.title for b in page([differing], summary, {})] == ["[A] t", "[B] t"]
