"""The paper's steps, each one module: the base model trained or adopted (`basemodel`), attribution ranks
extracted (`extract`, a chunk's work in `extract_tasks`), one retraining cell and its control (`cells`, cells in
other processes in `cell_workers`; what such a worker must see of the driver's run directory in `worker_view`), MoRF/LeRF/ROAD without retraining (`noretrain`), the hole detector
(`fill_leakage`); and the commands that chain them: `sweep` (base model, ranks, plan, executor), `retrain`
(the asked-for cells), `demo` (`roarfast run`: the quick sweep and its report).

A stage imports the building blocks, the records (`rundir`, `results`, `store`) and the report below it;
`sweep`, `retrain` and `demo` also the planners and the executors, which sit between them and the stages.
"""
