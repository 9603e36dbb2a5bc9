"""The Run table, first on the page: what was measured (dataset, model, the base model, chance, the test
split, the fills, how many cells) and how many mask-only controls and verdicts can be trusted for what."""

from roarfast.report.analysis import CONCLUSIVE, LEAK_INCONCLUSIVE, NO_CONTROL, UNTESTED
from roarfast.report.sections import Table, register
from roarfast.report.text import pct


def numbers(loaded, summary: dict) -> dict:
    context = loaded.context
    return {"datasets": sorted({c["dataset"] for c in loaded.cells}),
            "models": sorted({c["model"] for c in loaded.cells}),
            "chance_source": context.chance_source,
            "n_test": context.n_test,
            "counts": counts(summary["leakage"], summary["verdicts"])}


def counts(controls: list, verdicts: list) -> dict:
    """How many controls were tested and found leaky (an untested one is counted as such, never as not
    leaky), and how many verdicts were drawn and are conclusive beside their controls."""
    drawn = [e for e in verdicts if e["p_holm"] is not None]
    return {"controls": {"all": len(controls), "tested": sum(c["leaky"] is not None for c in controls),
                         "leaky": sum(bool(c["leaky"]) for c in controls),
                         "untested": sum(c["leaky"] is None for c in controls)},
            "verdicts": {"all": len(verdicts), "drawn": len(drawn),
                         "conclusive": sum(e["leak"] in CONCLUSIVE for e in drawn),
                         "inconclusive": sum(e["leak"] == LEAK_INCONCLUSIVE for e in drawn),
                         "unchecked": sum(e["leak"] in (NO_CONTROL, UNTESTED) for e in drawn)}}


def table(summary: dict) -> list:
    base = summary["base"]
    n_cells = sum(len(g["seeds"]) for g in summary["groups"])
    rows = [["dataset", ", ".join(summary["datasets"])], ["model", ", ".join(summary["models"])],
            ["base model test / validation accuracy", f"{pct(base['test_acc'])} / {pct(base['val_acc'])}"],
            ["chance", f"{pct(summary['chance'])} ({summary['chance_source']})"],
            ["test images", "-" if summary["n_test"] is None else str(summary["n_test"])],
            ["fills", ", ".join(summary["fills"]) or "-"], ["finished cells (with controls)", str(n_cells)],
            *_count_rows(summary["counts"])]
    return [Table("Run", ["", ""], rows)]


def _count_rows(counted: dict) -> list:
    """The rows counting the mask-only controls and the verdicts by what they can be trusted for."""
    controls, verdicts = counted["controls"], counted["verdicts"]
    untested = (f"; {controls['untested']} untested (chance or the test split's size unknown)"
                if controls["untested"] else "")
    not_drawn = verdicts["all"] - verdicts["drawn"]
    return [["mask-only controls", f"{controls['tested']} tested: {controls['leaky']} leaky{untested}"],
            ["verdicts against random", f"{verdicts['drawn']} drawn: {verdicts['conclusive']} conclusive, "
                                        f"{verdicts['inconclusive']} inconclusive (leaky control), "
                                        f"{verdicts['unchecked']} unchecked (no tested control)"
                                        + (f"; {not_drawn} not drawn (one seed or no random)" if not_drawn else "")]]


register("run", "what was measured, and how many controls and verdicts can be trusted", 10, numbers=numbers,
         blocks=table)
