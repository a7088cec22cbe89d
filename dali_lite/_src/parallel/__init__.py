"""The parallel engine: the batches of `fn.external_source(parallel=True)`, from workers.

One batch's way, main process on the left, a worker on the right (`dali_lite_workers`),
shared memory between them (`dali_lite_shm`); only small messages cross the pipes::

    executor thread                                    worker process
    ---------------                                    --------------
    ParallelSource.fetch(iteration)
      TaskSplit: tasks, idle worker  --RunTask-->      worker loop: SampleRange -> SampleInfos
      SlotLife.take: a free slot                       callback(sample_info), per sample
      group.send -> pool.submit                        SlotWriter.offer/write -> slot (shm)
    group.pump <- pool.collect       <--TaskDone--     reply: where the result lies
      SlotLife.done, source.on_result
      read_batch: leased views of the slots  (zero-copy numpy arrays, no bytes copied)
    -> the pipeline's outputs
    program drops the arrays -> lease end: SlotLife records it (any thread);
      the executor's thread frees the slot and schedules the next prefetch into it

`group.ParallelSourceGroup` starts a pipeline's pool and routes its replies; each
`source.ParallelSource` schedules its batches; `task_split` splits them into tasks and picks
workers; `slots` holds DALI's ring of slots (NOTE [DALI's ring]) and `slot_life` every move of
a slot (NOTE [a slot's life]); `tasks` keeps what was sent; `read` reads results; `placement`
lays a split batch out as one array. The engine talks to the pool through
`dali_lite_workers.TaskPool` and learns of a source only what a
`description.SourceDescription` says.
"""
