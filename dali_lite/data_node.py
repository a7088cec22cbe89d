"""`dali_lite.data_node`, as `nvidia.dali.data_node`: `DataNode` (the symbolic batch a graph
is defined with), `newaxis`, and `not_iterable` (what makes a DataNode no iterable). A public
face: the implementation lives in `dali_lite._src`."""

from __future__ import annotations

from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.graph.not_iterable import not_iterable
from dali_lite._src.operators.subscripts import newaxis

__all__ = ["DataNode", "newaxis", "not_iterable"]
