"""Names that last (issue 37, items 4 and 5): a configuration's label is what differs from the one before it, fixed
when it is made; a name given to it is kept and refused to another; every name and label it had selects it; a
Python object is named by what it is; results.load says which configuration each row is a cell of; a plan prints
as the dry run reads."""

import functools
import hashlib
from types import SimpleNamespace
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from roarfast.common.atomic import write_record
from roarfast.common.plugins import object_name, object_title, shown_method
from roarfast.errors import UserError
from roarfast.execution.executors import Progress
from roarfast.planning.grid import Grid, Plan, describe_plan
from roarfast.planning.preview import Preview
from roarfast.rundir.catalog import assemble
from roarfast.report.render import _blocks
from roarfast.report.sections import Lines, Table
from roarfast.report.text import titled
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB, load
from roarfast.rundir.configurations import configurations, grid_of, request, settings_of
from roarfast.rundir.directory import RunDir
from roarfast.records.head import FORMAT
from roarfast.records.configuration import ConfigurationRecord
from roarfast.cli import main
from roarfast.rundir.labels import check_name, select


def rid(text: str) -> str:
    """An id of the form a run directory's records hold (16 hex), standing for the artifact `text` names."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]

RECIPE = {"epochs": 2, "batch_size": 128, "lr": 0.1}
BUILTIN = {"roarfast": "0.1.0"}


#: a grid as a request records one
GRID = grid_of(["random", "grad"], ["roar"], [0.5], [0], [], "dataset-mean")


def config(epochs=2, samples=15, fingerprint="d" * 64, base="b" * 16) -> dict:
    return {"recipe": {**RECIPE, "epochs": epochs}, "dataset": fingerprint, "base": base,
            "ranks": {"granularity": "pixel", "reduction": "sum_sq", "parameters": {"sg_samples": samples},
                      "code": BUILTIN}, "rank_id": rid("r"), "fill": "dataset-mean"}


def settings(**given) -> dict:
    return settings_of({"dataset": "embedded", "model": "fastnet", "config": config(**given)})


def provenance(methods, samples=15, code=None) -> dict:
    return {m: {"granularity": "pixel", "reduction": "sum_sq", "parameters": {"sg_samples": samples},
                "code": (code or {}).get(m, BUILTIN)} for m in methods}


def ask(run, methods=("random", "sg-sq-grad"), num_train=2000, name=None, samples=15, code=None, **given) -> dict:
    ranks = {m: rid(f"{m}-{samples}-{(code or {}).get(m, '')}") for m in methods}
    about = {"base seed": 0, "base epochs": 2, "data options": {"num_train": num_train}}
    grid = grid_of(methods, ["roar"], [0.5], [0], [], "dataset-mean")
    record = request(run, settings(samples=samples, **given), ranks, provenance(methods, samples, code), grid, "test",
                     about, name)
    run.update_head("test", configuration=record["id"])  # as a request does: the next label is against this one
    return record


def test_a_label_says_what_differs_from_the_request_before_and_never_changes(tmp_path):
    run = RunDir(tmp_path)
    first = ask(run)
    second = ask(run, epochs=3, samples=20)
    assert first["label"] == "fastnet on embedded"
    assert second["label"] == "epochs 3, sg samples 20"  # every setting that differs, no "+N more"
    third = ask(run, epochs=3, samples=20, num_train=500, fingerprint="e" * 64)
    assert third["label"] == "num train 500"  # the data's fingerprint follows from it: not said
    assert ask(run, epochs=3, samples=20)["label"] == "epochs 3, sg samples 20"  # asked again: the same
    run.configuration_path(first["id"]).unlink()  # a prune of the first changes no other label
    assert [r["label"] for r in configurations(run)] == ["epochs 3, sg samples 20", "num train 500"]
    assert ask(run, samples=20)["label"] == "epochs 2"  # against the latest request's (HEAD's)
    # a label another goes by already is told apart, never shared
    assert ask(run, samples=20, num_train=500, fingerprint="e" * 64)["label"] == "num train 500 #4"


def test_a_digest_is_said_changed_never_shown_and_methods_by_what_they_are(tmp_path):
    run = RunDir(tmp_path)
    ask(run, methods=("random", "object:blur"), code={"object:blur": {"code_sha256": "1" * 64}})
    edited = ask(run, methods=("random", "object:blur"), code={"object:blur": {"code_sha256": "2" * 64}})
    assert edited["label"] == "blur code changed"
    more = ask(run, methods=("random", "grad", "object:blur"), code={"object:blur": {"code_sha256": "2" * 64}})
    assert more["label"] == "methods +grad"
    fewer = ask(run, methods=("grad",))  # blur's code: gone with blur, not said apart
    assert fewer["label"] == "methods -random -blur"
    for record in configurations(run):
        assert "object:" not in record["label"] and "sha256" not in record["label"] and "." not in record["label"]


def test_a_name_is_kept_refused_to_another_and_every_name_and_label_selects(tmp_path):
    run = RunDir(tmp_path)
    first = ask(run, name="baseline")
    second = ask(run, epochs=3)
    with pytest.raises(UserError, match="--name baseline: another configuration of this run directory goes by"):
        ask(run, epochs=3, name="baseline")
    with pytest.raises(UserError, match="--name epochs 3: another configuration"):  # a label is taken too
        ask(run, epochs=4, name="epochs 3")
    renamed = ask(run, name="v2")
    assert renamed["name"] == "v2" and renamed["aliases"] == ["baseline"] and renamed["label"] == first["label"]
    found = assemble(configurations(run), [])
    for text in ("v2", "baseline", first["label"], first["id"], first["id"][:6]):
        assert select(found, text).id == first["id"]
    assert select(found, "epochs 3").id == second["id"]
    assert found[0].label == "v2"  # shown by its name
    with pytest.raises(UserError, match="no such configuration"):
        select(found, "epochs 9")
    for bad in ("all", "  ", "1a2b3c"):
        with pytest.raises(UserError, match="--name"):
            ask(run, name=bad)


def test_a_record_made_before_labels_were_stored_gets_one_once(tmp_path):
    run = RunDir(tmp_path)
    old = []
    for epochs, first in ((2, "2026-01-01"), (5, "2026-01-02")):
        record = {"settings": settings(epochs=epochs), "ranks": {"random": rid("r")},
                  "provenance": provenance(["random"]), "grids": [], "first": first, "last": first,
                  "command": "roarfast sweep", "about": {}}
        record["id"] = ConfigurationRecord(record["settings"], record["ranks"]).id
        run.configurations_root.mkdir(parents=True, exist_ok=True)
        write_record(run.configuration_path(record["id"]), {**record, "format": FORMAT})
        old.append(record["id"])
    shown = [r["label"] for r in configurations(run)]
    assert shown == ["fastnet on embedded", "epochs 5"]  # shown as computed, nothing written by a reader
    assert "label" not in run.configuration_path(old[1]).read_text()
    ask(run, epochs=7)  # the first write stores them, as they were shown
    assert [r["label"] for r in configurations(run)][:2] == shown
    assert '"label": "epochs 5"' in run.configuration_path(old[1]).read_text().replace('":"', '": "')


ANONYMOUS = lambda model, images, target: images  # noqa: E731  (a lambda is what is named here)


def mix(model, images, target, w=1.0):
    return images * w


@dataclass
class Blur:
    sigma: float
    kernel: object = None

    def __call__(self, model, images, target):
        return images


def test_python_objects_are_named_by_what_they_are():
    assert object_title(functools.partial(mix, w=0.1)) == "mix(w=0.1)"
    assert object_title(functools.partial(mix, 0.5)) == "mix(0.5)"
    assert object_title(Blur(2.0, kernel=[1, 2])) == "Blur(sigma=2.0)"  # plain fields: what tells two apart
    assert object_title(ANONYMOUS) == "lambda"
    # recorded names keep their digest (two objects, two names); the title is what a label and a table show
    name = object_name(functools.partial(mix, w=0.1), "f983f37c" * 8)
    assert name == "object:partial.mix-f983f37c"
    from roarfast.rundir.configurations import _titles

    assert _titles({name: "x", "random": "y"}) == {name: "mix(w=0.1)"}
    # and what a dry run's or a sweep's lines show
    assert shown_method(name) == "mix(w=0.1)" and shown_method("random") == "random"


def test_results_load_says_which_configuration_each_cell_is_of(tmp_path):
    run = RunDir(tmp_path)
    rows = {}
    with ResultsDB(run.results_path) as db:
        for epochs in (2, 3):
            for method in ("random", "grad"):
                made = config(epochs=epochs)
                made["rank_id"] = rid(f"{method}-ranks" if method == "random" or epochs == 2 else "grad-other")
                key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method=method, mode="roar",
                                        fill="dataset-mean", fraction=0.5, seed=0, config=made)
                db.record(key, {"test_acc": 0.5, "val_acc": 0.5, "epochs": epochs, "seconds": 1.0, "versions": {}})
                rows[(epochs, method)] = made
    two = request(run, settings(epochs=2), {"random": rid("random-ranks"), "grad": rid("grad-ranks")}, {}, GRID, "test", {}, "two")
    # a configuration that shares the random cell of epochs 2 (the same settings and ranks) but not grad's
    other = request(run, settings(epochs=2), {"random": rid("random-ranks"), "grad": rid("grad-other")}, {}, GRID, "test", {})
    frame = load(run.root)
    assert {"configuration", "name"} <= set(frame.columns)
    mine = frame[frame["configuration"] == two["id"]]
    assert sorted(mine["method"]) == ["grad", "random"] and set(mine["name"]) == {"two"}
    assert sorted(frame[frame["configuration"] == other["id"]]["method"]) == ["random"]  # the shared cell, again
    unclaimed = frame[frame["epochs"] == 3]  # cells no record claims: the id the report gives them
    assert len(unclaimed) == 2 and unclaimed["configuration"].nunique() == 1 and unclaimed["name"].isna().all()
    assert sorted(load(run.root, config="two")["method"]) == ["grad", "random"]
    assert list(load(run.root, config=other["label"])["configuration"]) == [other["id"]]
    with pytest.raises(UserError, match="config nothing: no such configuration"):
        load(run.root, config="nothing")


def test_a_plan_prints_as_the_dry_run_reads_and_displays_as_a_table():
    plan = Preview.__new__(Preview)  # only its rows matter to how it prints
    plan.rows = lambda: [("data", "embedded <a>"), ("ETA", "3m05s")]
    assert str(plan) == repr(plan) == "data: embedded <a>\nETA: 3m05s"
    page = plan._repr_html_()
    assert "<table>" in page and "embedded &lt;a&gt;" in page and "<a>" not in page


def test_the_sweep_eta_starts_from_the_estimate_before_a_cell_finishes():
    grid = Grid(methods="random", modes=("roar",), fractions=(0.5,), seeds=1, control_seeds=1)
    plan = Plan(cells=[(cell, None) for cell in grid.cells()])
    assert describe_plan(plan, grid)[-1].startswith("ETA: unknown")  # no rate measured, none kept
    plan.estimated = {"cell": 30.0, "control": 30.0}
    assert describe_plan(plan, grid)[-1] == ("ETA: 1m00s (estimated from the step times kept on this machine, as a "
                                             "dry run: 30s per cell, 30s per control)")
    progress = Progress(2, True, lambda line: None, eta=plan.finished, start=plan.eta())
    assert progress.bar.postfix == "ETA=1m00s"  # on the bar before the first cell finishes
    cell, control = [c for c, _ in plan.cells]
    progress.cell_done(cell, {"test_acc": 0.5, "seconds": 10.0}, [(control, None)])
    assert progress.bar.postfix == "ETA=30s"  # the control's, still from the estimate: never unknown
    progress.close()


def test_what_differs_is_every_setting_whole_and_a_method_s_own_only_where_it_is_run(tmp_path):
    run = RunDir(tmp_path)
    ask(run, methods=("random", "object:blur"), code={"object:blur": {"code_sha256": "1" * 64}})
    ask(run, methods=("random", "object:blur"), code={"object:blur": {"code_sha256": "2" * 64}}, epochs=3)
    ask(run, methods=("random",), epochs=3, samples=20, num_train=500, fingerprint="e" * 64)
    table = [c.differs for c in assemble(configurations(run), [])]
    assert list(table[0]) == ["num train", "epochs", "methods", "sg samples", "blur code", "data"]  # digests last
    assert [row["blur code"] for row in table] == ["1" * 64, "2" * 64, None]  # shown cut short, never in a label
    assert [row["methods"] for row in table] == [("random", "blur"), ("random", "blur"), ("random",)]
    assert [row["num train"] for row in table] == [2000, 2000, 500]


def test_the_report_lists_the_other_configurations_with_what_differs_against_the_reported_one():
    from roarfast.report.sections.configurations import blocks

    reported = {"label": "sixteen", "id": "9be03d11aaaa0000", "cells": 4, "command": "roarfast sweep",
                "differs": {"ig steps": 16, "data": "e" * 64}}
    other = {"label": "fastnet on embedded", "id": "1452c0abbbbb0000", "cells": 2, "command": None,
             "differs": {"ig steps": 2, "data": "d" * 64}, "report": "roarfast report --config 1452c0ab"}
    (table,) = [b for b in blocks({"configuration": reported, "others": [other]}) if b.title.startswith("Other")]
    assert table.header[-2:] == ["ig steps", "data"]
    assert table.rows == [["sixteen", "9be03d11", "4", "roarfast sweep", "this report", "16", "eeeeeeee"],
                          ["fastnet on embedded", "1452c0ab", "2", "-", "`roarfast report --config 1452c0ab`", "2",
                           "dddddddd"]]


def test_the_report_shows_an_object_by_what_it_is_in_its_lines_and_tables():
    name = "object:partial.mix-f983f37c"
    part = {"configuration": {"titles": {name: "mix(w=0.1)", "grad": "grad"}}}
    assert titled(f"ROAR 50% {name}: better than random", part) == "ROAR 50% mix(w=0.1): better than random"
    assert titled("ROAR 50% grad: no different", part) == "ROAR 50% grad: no different"  # a built-in as it is
    assert titled(0.5, part) == 0.5  # numbers untouched
    section = SimpleNamespace(name="rankings", blocks=lambda summary: [
        Table("ranking", ["method", "AUC"], [[name, "40.1%"]]), Lines("verdicts", [f"{name}: better"])])
    table, lines = _blocks(section, part)
    assert table.rows == [["mix(w=0.1)", "40.1%"]] and lines.lines == ["mix(w=0.1): better"]


@pytest.mark.parametrize("bad", ["7DCCF27C", "7dccf27c", "DeadBeef", "0123", "all", "  ", "line one\nline two",
                                 "tab\there", "right\u202eto left", "bell\x07", "\x1b[31mred"])
def test_a_name_that_reads_as_an_id_or_holds_an_unprintable_character_is_refused_in_one_line(bad):
    with pytest.raises(UserError, match="^--name ") as refused:
        check_name(bad)
    assert "\n" not in str(refused.value)  # the refusal itself cannot forge a line either
    result = CliRunner().invoke(main, ["sweep", "--name", bad, "--dry-run"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "--name" in lines[0], result.output


def test_a_name_of_hex_letters_too_short_for_an_id_prefix_or_with_other_letters_is_kept():
    for good in ("abc", "7dccf27g", "cafe bar", "run: 0.1 épochs"):
        assert check_name(f" {good} ") == good
