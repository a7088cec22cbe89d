"""The parallel engine: the batches of `fn.external_source(parallel=True)`, from workers.

`group.ParallelSourceGroup` starts a pipeline's pool and routes its replies; each
`source.ParallelSource` schedules its batches as tasks on shared-memory `slots`, follows them
(`tasks`), reads the results (`read`) and lays split batches out as one array (`placement`).
The engine talks to the pool through `dali_lite_workers.TaskPool` and learns of a source only what a
`description.SourceDescription` says.
"""
