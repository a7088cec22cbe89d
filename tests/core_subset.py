"""The core subset of the suite: a few minutes of tests that exercise what every install
needs, marked `core` (tests/conftest.py) and run with `python -m pytest -m core`.

CI runs it on every Python the project claims besides the one that runs the whole suite
(.ci/run), with only the `test` extra installed: no NVIDIA DALI, torch, Ray, Numba or JAX, so
what needs them skips. It covers the types and tensors, the pipeline, serial and parallel
external_source (fork and spawn), checkpoints, DALI's arithmetic and every operator family
(against their recorded behaviour in DALI, and their own properties), the README's operator
table, the worker pool and its start methods, shared memory, what an install puts in a user's
namespace, and the wheel and sdist. This list is the one place that says so.
"""

from __future__ import annotations

#: Test files (paths from the repository root) or single tests (node ids) in the subset.
CORE_TESTS: tuple[str, ...] = (
    "tests/types/test_types.py",
    "tests/data/test_tensors.py",
    "tests/api/test_public_paths.py",
    "tests/pipeline/test_pipeline.py",
    "tests/sources/test_external_source.py",
    "tests/sources/test_iterator_epochs.py",
    "tests/parallel/test_parallel_epochs.py",
    "tests/parallel/test_parallel_shm.py",
    "tests/pipeline/test_checkpoint.py",
    "tests/operators/test_arithmetic_facts.py",
    "tests/operators/facts/test_operator_records.py",
    "tests/operators/facts/test_geometry_facts.py",
    "tests/operators/facts/test_value_facts.py",
    "tests/workers/test_pool_basic.py",
    "tests/workers/test_start_methods.py",
    "tests/shm/test_segment.py",
    "tests/shm/test_codec.py",
    "tests/shm/test_stats.py",
    "tests/test_install_names.py",
    "tests/test_install_hints.py",
    "tests/test_ci_setup.py",
    "tests/test_packaging.py",
    "tests/test_readme_api.py",
)

#: Left to the whole suite: hypothesis searches that take most of their file's time and
#: whose code paths the subset's other tests of that file already run.
NOT_CORE: tuple[str, ...] = (
    "tests/pipeline/test_checkpoint.py::test_property_parallel_any_prefix_restores",
    "tests/pipeline/test_checkpoint.py::test_property_serial_any_prefix_restores",
)


def _matches(nodeid: str, entries: tuple[str, ...]) -> bool:
    return any(nodeid == entry or nodeid.startswith((f"{entry}::", f"{entry}["))
               for entry in entries)


def is_core(nodeid: str) -> bool:
    """Whether the test with this node id (relative to the repository root) is in the subset."""
    return _matches(nodeid, CORE_TESTS) and not _matches(nodeid, NOT_CORE)


def file_in_subset(path: str) -> bool:
    """Whether any test of this file (relative to the repository root) is in the subset."""
    return any(entry.split("::", 1)[0] == path for entry in CORE_TESTS)
