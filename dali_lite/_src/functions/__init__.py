"""The functions room: the operators that run a user's function on a batch: Python
(`python_function`, `dl_tensor_python_function`, on the CPU and the GPU), Numba and JAX."""
