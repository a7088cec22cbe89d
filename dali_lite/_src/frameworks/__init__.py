"""The frameworks room: DALI's PyTorch and JAX iterators and torch_python_function, on top
of every other room. PyTorch and JAX are optional extras: these modules import them, and only
the plugin faces that name them load them."""
