"""`dali_lite.plugin.pytorch`, as `nvidia.dali.plugin.pytorch`: DALI pipelines feeding PyTorch.

`DALIGenericIterator` (and `DALIClassificationIterator`, `DALIRaggedIterator`) run one or more
pipelines and give one dict of tensors per pipeline per step; `LastBatchPolicy` says what
happens to an incomplete last batch; `feed_ndarray` / `to_torch_type` copy DALI tensors into
PyTorch ones; `fn.torch_python_function` runs a function on torch tensors inside a pipeline.

PyTorch is an optional extra (`pip install torch`, or `pip install -e '.[torch]'` in a clone
of dali_lite); like DALI's, this module imports it, and `import dali_lite` alone never does.
"""

from __future__ import annotations

# The rooms import PyTorch (an optional extra) and say what to install without it.
from dali_lite._src.frameworks.base_iterator import LastBatchPolicy
from dali_lite._src.frameworks.torch_iterators import (
    DALIClassificationIterator,
    DALIGenericIterator,
    DALIRaggedIterator,
)
from dali_lite._src.frameworks.torch_utils import feed_ndarray, to_torch_tensor, to_torch_type
from dali_lite.plugin.pytorch import fn
from dali_lite.plugin.pytorch.fn import TorchPythonFunction

__all__ = [
    "DALIClassificationIterator",
    "DALIGenericIterator",
    "DALIRaggedIterator",
    "LastBatchPolicy",
    "TorchPythonFunction",
    "feed_ndarray",
    "fn",
    "to_torch_tensor",
    "to_torch_type",
]
