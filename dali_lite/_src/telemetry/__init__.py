"""Where a pipeline's loading time goes: the record that the workers' replies, the parallel
sources and the pipeline's waits feed while it runs (`recorder.LoadingRecorder`), read back
as a plain dict by `Pipeline.loading_statistics()` (docs/telemetry.md).

The room sits below `parallel` and `pipeline`, which feed it through the recorder's methods
(one call per reply, per fetch and per iteration, never per sample); it imports no other room.
"""
