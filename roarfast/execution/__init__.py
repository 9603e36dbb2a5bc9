"""Where the work runs: the backends of the Executor interface the stages are handed (roarfast.stages.executor),
one module each: `local` (in this process, or cell processes side by side) and `ray_executor` (tasks on a Ray
cluster: cells and extraction chunks); `executors`: a cell's claim, record and failure in results.sqlite, and the
one in-flight loop of the backends whose cells train elsewhere; `registry`: the executors by name and
`make_executor`, the one place the user's --executor becomes an Executor (the command line, a Study and the sweep
call it; the registry names the backends by import path); `ray_cluster`: Ray's options, connecting, what the live
nodes hold.

It sits above the stages (it runs a `CellTrainer`; the worker side is `stages.cell_workers` and
`stages.extract_tasks`), beside the planners, below roarfast.orchestration.
"""
