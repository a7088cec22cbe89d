"""`dali_lite.pickling`, as `nvidia.dali.pickling`: `pickle_by_value`. A public face: the
implementation lives in `dali_lite._src.parallel`."""

from __future__ import annotations

from dali_lite._src.parallel.by_value import pickle_by_value

__all__ = ["pickle_by_value"]
