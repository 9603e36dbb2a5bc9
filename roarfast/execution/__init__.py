"""Where the work runs. `base`: the Executor interface the stages receive; `registry`: the executors by name
(`EXECUTORS`), the options that choose one (`ExecutorOptions`) and `make_executor`, the one place the user's
--executor becomes an Executor; `backends/`: one module each, registering itself with its own options: `local` (in
this process, or cell processes side by side) and `ray` (tasks on a Ray cluster: cells and extraction chunks);
`executors`: a cell's claim, record and failure in results.sqlite, and the one in-flight loop of the backends
whose cells train elsewhere; `ray_cluster`: connecting to Ray, what the live nodes hold.

`base`, `registry` and `ray_cluster` are utilities below the stages (they import only `common` and `errors`; the
registry finds the backends by their package's name); `executors` sits above the stages (it runs a
`CellTrainer`), and the backends above it (the worker side in `stages.cell_workers` and `stages.extract_tasks`).
"""
