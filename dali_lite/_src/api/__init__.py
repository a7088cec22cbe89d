"""The api room: what the faces re-export: the contents of `dali_lite.fn` and `dali_lite.ops`
(the table's operators, the sources and Python functions, DALI's operators dali_lite lacks) and
the functions of the Numba and JAX plugins; on top of the operators and the pipeline."""
