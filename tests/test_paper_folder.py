"""`roarfast paper`: a paper's folder in one command, from real run directories built from stored rows — figures for a
column and for the page, tables labelled by what they hold (the same labels as `roarfast report`'s, with or without
--all), the study's status and warnings as table notes, a combined table across configurations, a methods paragraph
citing exactly what references.bib holds, and a two-column article that compiles without a line running into the
margin (pdflatex, where installed); CITATION.cff at the repository's root."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import roarfast
from roarfast.cli import main
from roarfast.fills import FILLS
from roarfast.methods.declaration import ESTIMATORS
from roarfast.report import ALL, write_report
from roarfast.report.citations import BIBTEX
from roarfast.report.figures import COLUMN, PAGE
from roarfast.results import load
from tests.test_compare import make_shared_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return make_shared_run(tmp_path_factory.mktemp("paper") / "run")


@pytest.fixture(scope="module")
def folder(shared):
    """The paper folder of two of the run directory's three configurations: sg15 (conclusive) and adopted (adopted
    weights, its cells at chance: inconclusive), written by the command line (PDF figures only: what a paper
    includes)."""
    out = shared.root.parent / "paper"
    result = CliRunner().invoke(main, ["paper", str(shared.root), "--config", "sg15", "--config", "adopted",
                                       "--out", str(out), "--figure-format", "pdf"])
    assert result.exit_code == 0, result.output
    assert f"paper folder: {out} (" in result.output
    return out


def ids(shared) -> dict:
    frame = load(shared.root)
    return {name: cid[:8] for cid, name in zip(frame["configuration"], frame["name"])}


def labels(tex: str) -> list:
    return re.findall(r"\\label\{(tab:[^}]+)\}", tex)


def test_the_folder_holds_figures_for_a_column_and_the_page_tables_methods_and_references(folder, shared):
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"figures.tex", "tables.tex", "tables.md", "methods.tex", "methods.md", "references.bib",
            "preview.tex"} <= names
    figures = sorted(n for n in names if n.startswith("figures/"))
    for name in figures:  # each figure at its print width, uncropped
        media = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ", (folder / name).read_bytes())
        assert float(media.group(1)) == pytest.approx(72 * (COLUMN if name.endswith("-column.pdf") else PAGE), abs=0.5)
    stems = {n.removesuffix("-column.pdf").removesuffix("-page.pdf") for n in figures}
    assert {f"figures/{s}" for s in ("ranking_dataset-mean_sg15", "accuracy_dataset-mean_adopted", "controls_sg15")} \
        <= stems
    assert not any("ensembles" in s for s in stems)  # sg-sq-grad ran without grad: no family to show
    included = re.findall(r"\\includegraphics\[width=\\(linewidth|textwidth)\]\{figures/([^}]+)\}",
                          (folder / "figures.tex").read_text())
    assert included and all(f.endswith("-column.pdf") == (w == "linewidth") for w, f in included)
    configuration = ids(shared)
    label = f"\\label{{fig:roarfast-{configuration['sg15']}-ranking-dataset-mean}}"
    assert label in (folder / "figures.tex").read_text()


def test_table_labels_are_made_of_what_they_hold_and_stable_across_commands(folder, shared, tmp_path):
    paper = labels((folder / "tables.tex").read_text())
    every = labels(write_report(shared.root, tmp_path / "all", config=ALL).out_dir.joinpath("tables.tex").read_text())
    one = labels(write_report(shared.root, tmp_path / "one", config="sg15").out_dir.joinpath("tables.tex").read_text())
    configuration = ids(shared)
    assert f"tab:roarfast-{configuration['sg15']}-ranking-roar-dataset-mean" in one
    assert set(one) < set(paper) < set(every)  # one configuration's tables, the paper's two, then all three
    assert "tab:roarfast-combined-auc-roar-dataset-mean" in set(paper) & set(every)
    assert len(paper) == len(set(paper))  # no two tables share a label


def test_the_status_and_warnings_are_table_notes_and_captions_say_what_was_measured(folder, shared):
    tex = (folder / "tables.tex").read_text()
    floats = re.findall(r"\\begin\{table\*?\}.*?\\end\{table\*?\}", tex, re.S)
    adopted = [f for f in floats if f"{ids(shared)['adopted']}-" in f]
    assert adopted and all("Study status: INCONCLUSIVE" in f for f in adopted)
    assert any("Warning: the base model is weak" in f for f in adopted)
    ranking = next(f for f in adopted if "-ranking-" in f)
    assert "Not a finding (study INCONCLUSIVE)" in ranking and "area under each one's test-accuracy curve" in ranking
    sg15 = [f for f in floats if f"{ids(shared)['sg15']}-" in f]
    assert all("Study status: CONCLUSIVE." in f for f in sg15)
    assert not re.search(r"Methods|index\.html|section", tex)  # captions point to no page of the report
    combined = next(f for f in floats if "combined-auc" in f)
    assert "A: configuration sg15" in combined and "B: configuration adopted" in combined


def test_methods_cite_exactly_the_references_and_name_what_ran(folder):
    methods, bib = (folder / "methods.tex").read_text(), (folder / "references.bib").read_text()
    cited = {k for group in re.findall(r"\\cite\{([^}]+)\}", methods) for k in group.split(",")}
    entries = set(re.findall(r"^@\w+\{([^,]+),", bib, re.M))
    assert cited == entries >= {"hooker2019benchmark", "roarfast", "smilkov2017smoothgrad", "simonyan2014deep"}
    text = (folder / "methods.md").read_text()
    assert "sg-sq-grad" in text and "adopted weights (/data/weights.pt, sha256 ffffffff" in text
    assert "Study status: INCONCLUSIVE" in text and "Holm" in text and "Significance level 0.05" in text


def test_every_paper_a_record_cites_has_its_bibtex():
    cited = {k for name in ESTIMATORS.names for k in ESTIMATORS.load(name).cites}
    cited |= {k for name in FILLS.names for k in FILLS.load(name).cites}
    assert {"sundararajan2017axiomatic", "springenberg2015striving", "selvaraju2017gradcam",
            "rong2022consistent"} <= cited <= set(BIBTEX)


def test_citation_cff_names_this_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == roarfast.__version__
    assert cff["references"][0]["title"] == "A Benchmark for Interpretability Methods in Deep Neural Networks"


@pytest.mark.parametrize("args, says", [
    (["--config", "sg7"], "--config sg7: no such configuration"),
    (["--figure-format", "svg"], "a paper's figures.tex includes a PDF or a PNG"),
])
def test_bad_input_is_one_line(shared, tmp_path, args, says):
    result = CliRunner().invoke(main, ["paper", str(shared.root), "--out", str(tmp_path / "p"), *args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and says in lines[0], result.output
    assert not (tmp_path / "p").exists()


def test_the_folder_compiles_as_a_two_column_article_with_nothing_in_the_margin(folder, tmp_path):
    if shutil.which("pdflatex") is None or shutil.which("bibtex") is None:
        pytest.skip("pdflatex not installed (CI installs texlive-latex-base, -recommended, -fonts-recommended)")
    work = tmp_path / "paper"
    shutil.copytree(folder, work)
    for command in (["pdflatex"], ["bibtex"], ["pdflatex"], ["pdflatex"]):
        args = command + (["-interaction=nonstopmode", "-halt-on-error"] if command[0] == "pdflatex" else [])
        done = subprocess.run(args + ["preview"], cwd=work, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:]
    log = (work / "preview.log").read_text(errors="replace")
    assert "Overfull \\hbox" not in log, re.findall(r"Overfull \\hbox.*", log)
    assert not re.search(r"(Citation|Reference) `[^']+' (on page \d+ )?undefined", log)
    assert (work / "preview.pdf").stat().st_size > 10_000
