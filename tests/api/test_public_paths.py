"""Every import a DALI program writes works with `nvidia.dali` replaced by `dali_lite`.

The names are those of DALI 2.4's public modules that the spec pages document; the faces
re-export them from `dali_lite._src`, and this test keeps them there through any refactoring.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC_NAMES = {
    "dali_lite": ["Pipeline", "pipeline_def", "fn", "types", "backend", "tensors", "pipeline"],
    "dali_lite.pipeline": ["Pipeline", "pipeline_def"],
    "dali_lite.fn": ["external_source", "python_function", "dl_tensor_python_function"],
    "dali_lite.types": ["DALIDataType", "DALIImageType", "DALIInterpType", "TensorLayout",
                        "SampleInfo", "BatchInfo", "UINT8", "INT32", "FLOAT", "FLOAT16",
                        "FLOAT64", "BOOL", "RGB", "BGR", "GRAY", "INTERP_LINEAR",
                        "to_numpy_type"],
    "dali_lite.backend": ["TensorCPU", "TensorListCPU", "TensorGPU", "TensorListGPU"],
    "dali_lite.tensors": ["TensorCPU", "TensorListCPU", "TensorGPU", "TensorListGPU"],
    "dali_lite.python_function_plugin": ["current_dali_stream"],
    "dali_lite.plugin.numba.fn.experimental": ["numba_function"],
    "dali_lite.plugin.numba.experimental": ["NumbaFunction"],
    "dali_lite.plugin.jax.fn": ["jax_function"],
    "dali_lite.plugin.base_iterator": ["LastBatchPolicy", "_DaliBaseIterator"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC_NAMES))
def test_public_module_has_its_names(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in PUBLIC_NAMES[module] if not hasattr(imported, name)]
    assert not missing, f"{module} lacks {missing}"


def test_from_import_spellings() -> None:
    import dali_lite
    from dali_lite.plugin import jax as dax
    from dali_lite.plugin import numba as dnumba

    assert callable(dax.fn.jax_function)
    assert callable(dnumba.fn.experimental.numba_function)
    assert dali_lite.Pipeline is dali_lite.pipeline.Pipeline


def test_classes_name_their_public_module() -> None:
    """Reprs and pickles name the face, never the private room."""
    import dali_lite.tensors as tensors

    for cls in (tensors.TensorCPU, tensors.TensorListCPU, tensors.TensorGPU,
                tensors.TensorListGPU):
        assert not cls.__module__.startswith("dali_lite._src"), cls


def test_import_dali_lite_imports_no_framework_or_pool() -> None:
    """`import dali_lite` stays light: no optional framework, and no worker machinery until a
    pipeline has a parallel source (only the registry of start methods, which the pipeline's
    options are checked against: names and flags, no pool)."""
    code = ("import sys, dali_lite, dali_lite.fn, dali_lite.types; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'jax', 'cupy', 'numba', 'ray', 'dali_lite_workers', 'dali_lite_shm')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == str(["dali_lite_workers", "dali_lite_workers.start_methods"])
