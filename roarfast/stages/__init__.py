"""The paper's steps, each one module: the base model trained or adopted (`basemodel`), attribution ranks
extracted (`extract`, a chunk's work in `extract_tasks`), one retraining cell and its control (`cells`, cells in
other processes in `cell_workers`; what such a worker must see of the driver's run directory in `worker_view`),
MoRF/LeRF/ROAD without retraining (`noretrain`), the hole detector (`fill_leakage`); and what a stage is handed
or leaves behind: the `Executor` interface (`executor`: where its work runs, whatever the backend) and the seconds
per image it measured (`step_times`, which the planners read).

A stage imports the building blocks, the records and the run directory (`records`, `rundir`, `store`,
`measurements`); never a backend of roarfast.execution nor its registry (it is handed an Executor), a planner or
what chains the stages (roarfast.orchestration).
"""
