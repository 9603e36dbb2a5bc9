"""Where the work runs: the backends of the Executor interface the stages are handed (roarfast.stages.executor).
`registry`: the executors by name (`EXECUTORS`), the options that choose one (`ExecutorOptions`) and
`make_executor`, the one place the user's --executor becomes an Executor (the command line, a Study and the sweep
call it); `backends/`: one module each, registering itself with its own options: `local` (in this process, or cell
processes side by side) and `ray` (tasks on a Ray cluster: cells and extraction chunks); `executors`: a cell's
claim, record and failure in results.sqlite, and the one in-flight loop of the backends whose cells train
elsewhere; `ray_cluster`: connecting to Ray, what the live nodes hold.

It sits above the stages (it runs a `CellTrainer`; the worker side is `stages.cell_workers` and
`stages.extract_tasks`), beside the planners, below roarfast.orchestration.
"""
