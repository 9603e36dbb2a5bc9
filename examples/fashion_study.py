"""The study of fashion_cli.py through roarfast.Study, for a notebook: the same FashionMNIST-format files, the
network and estimator of my_plugins.py passed as Python objects, the sweep, the no-retrain evaluations, the
report and the measurements as a DataFrame.

    python examples/fashion_study.py [--out runs/fashion-study] [--train 6000 --test 1000 --epochs 3 --seeds 2]
"""

import argparse
from pathlib import Path

from fashion_cli import write_fashion
from my_plugins import input_x_gradient, small_cnn

from roarfast import Study


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/fashion-study"))
    parser.add_argument("--train", type=int, default=6000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--fractions", default="0.3,0.7")
    args = parser.parse_args(argv)
    data = write_fashion(args.out / "data", args.train, args.test)

    study = Study(args.out / "run", model=small_cnn, dataset="torchvision:FashionMNIST", data_dir=data,
                  methods=[input_x_gradient, "grad", "gb"], fractions=[float(f) for f in args.fractions.split(",")],
                  seeds=args.seeds, recipe={"epochs": args.epochs}, device="cpu")
    cells = study.run()
    study.evaluate(["morf", "lerf"], fractions=[float(f) for f in args.fractions.split(",")])
    report = study.report()
    for line in report.verdict_lines():
        print(line)
    print(cells.groupby(["mode", "method", "fraction"])["test_acc"].mean().unstack("fraction").round(3))
    print(f"report: {report.index_html}")


if __name__ == "__main__":
    main()
