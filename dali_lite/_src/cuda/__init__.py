"""The CUDA room: CuPy imported lazily, each pipeline's device, stream and events, and GPU
memory; below the data room, and nothing here imports CuPy until a GPU stage needs it."""
