"""The study of fashion_cli.py through roarfast.Study, for a notebook: the same FashionMNIST-format files, the
network and estimator of my_plugins.py passed as Python objects, the sweep, the no-retrain evaluations, the
report and the measurements as a DataFrame.

    python examples/fashion_study.py [--out runs/fashion-study] [--train 6000 --test 1000 --epochs 3 --seeds 2]
"""

from fashion_cli import study_arguments, write_fashion
from my_plugins import input_x_gradient, small_cnn

from roarfast import Study


def main(argv=None) -> None:
    args = study_arguments(__doc__.splitlines()[0], "runs/fashion-study", argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    data = write_fashion(args.out / "data", args.train, args.test)

    study = Study(args.out / "run", model=small_cnn, dataset="torchvision:FashionMNIST", data_dir=data,
                  methods=[input_x_gradient, "grad", "gb"], fractions=fractions,
                  seeds=args.seeds, recipe={"epochs": args.epochs}, device="cpu")
    cells = study.run()
    study.evaluate(["morf", "lerf"], fractions=fractions)
    report = study.report()
    for line in report.verdict_lines():
        print(line)
    print(cells.groupby(["mode", "method", "fraction"])["test_acc"].mean().unstack("fraction").round(3))
    print(f"report: {report.index_html}")


if __name__ == "__main__":
    main()
