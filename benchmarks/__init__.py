"""Side-by-side benchmarks of dali_lite against NVIDIA DALI, PyTorch's DataLoader and Grain.

Run ``python -m benchmarks`` (or ``python benchmarks/run.py``); see :mod:`benchmarks.run` for
the options and ``benchmarks/RESULTS.md`` for the latest figures and what they mean.

Modules:

* :mod:`benchmarks.workloads`: the workloads and their callbacks (module level, so forked
  workers of every loader run the very same functions);
* :mod:`benchmarks.loaders`: one adapter per loader that builds it, yields batches and turns
  each into one contiguous numpy array;
* :mod:`benchmarks.ceilings`: the ceilings measured beside the loaders, the callback alone
  and the callback plus one copy of each sample into shared memory out of cache;
* :mod:`benchmarks.child`: one measurement, run in a fresh interpreter;
* :mod:`benchmarks.memory`: the memory of a process tree (RSS, USS, PSS, shared memory),
  sampled from outside;
* ``training_main.py``: the main module of the first-batch measurements (it imports torch, as
  a training script does);
* :mod:`benchmarks.report`: medians, ratios, targets and the markdown table;
* :mod:`benchmarks.chart`: the same medians as a PNG bar chart (`--chart`, or redrawn from a
  `--json` or `--out` file);
* :mod:`benchmarks.profiling`: profiler hooks for the main process and the workers;
* :mod:`benchmarks.run`: the command line.

``soak.py`` (memory over a million samples) and ``gpu_transfer.py`` (host-to-device copies)
live here too, as stand-alone scripts outside this suite.
"""
