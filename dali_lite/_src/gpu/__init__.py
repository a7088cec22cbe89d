"""The GPU room: the GPU stages of a pipeline in the main process: `fn.external_source(
device="gpu")`, the `.gpu()`/`.cpu()` transfers and the pinned staging they go through."""
