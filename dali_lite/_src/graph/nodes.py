"""The operator graph: `DataNode` (an edge, one output of an operator) and `Operator` (a node).

A pipeline's graph is built by calling `fn.*` functions inside a pipeline's scope (`with pipe:`,
`define_graph()` or a `pipeline_def` function). Each call creates an `Operator`, registers it
with the pipeline that is current at that moment, and returns its outputs as `DataNode`s.
`Pipeline.build()` walks back from the pipeline outputs, adds every registered operator that
must run anyway (sources, `preserve`d operators, sinks), and orders them topologically.

An operator's `run()` takes the batches of its inputs and returns the batches of its outputs,
once per iteration; the executor calls operators in the order `topological_order` gives.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from dali_lite._src.graph.arithmetic import DataNodeOperators
from dali_lite._src.graph.not_iterable import mark_not_iterable
from dali_lite._src.graph.scope import PipelineScope

if TYPE_CHECKING:  # annotations only: the pipeline stands above the graph
    from dali_lite._src.options import PipelineView

_operator_ids = itertools.count()

#: The transfer operators `DataNode.gpu()` and `.cpu()` create, by target device. They are
#: operators, which stand on this module, so the operator room registers them at import
#: (`dali_lite._src.gpu.transfer`) instead of this module importing upwards.
_TRANSFERS: dict[str, Callable[[DataNode], DataNode]] = {}


def register_transfer(device: str, copy: Callable[[DataNode], DataNode]) -> None:
    """Make `DataNode.gpu()` (device "gpu") or `.cpu()` (device "cpu") call `copy`."""
    _TRANSFERS[device] = copy


def _transfer(device: str) -> Callable[[DataNode], DataNode]:
    try:
        return _TRANSFERS[device]
    except KeyError:
        raise RuntimeError(
            f"no transfer to the {device.upper()} is registered: import dali_lite.fn (which "
            "loads the transfer operators) before defining a graph") from None


#: The operators `DataNode.shape()` ("shape": node, dtype, device) and `.property()`
#: ("property": node, key, device) build, registered by the operator room as the transfers are.
_METADATA: dict[str, Callable[..., DataNode]] = {}


def register_metadata(kind: str, build: Callable[..., DataNode]) -> None:
    """Make `DataNode.shape()` (kind "shape") or `.property()` (kind "property") call `build`."""
    _METADATA[kind] = build


def _metadata(kind: str) -> Callable[..., DataNode]:
    try:
        return _METADATA[kind]
    except KeyError:
        raise RuntimeError(
            f"no {kind} operator is registered: import dali_lite.fn (which loads the "
            "operators) before defining a graph") from None


#: DALI's words when a DataNode is truth-tested, to the letter (DALI's own tests match all
#: of it, the decorator's name included).
_BOOL_MESSAGE = (
    '"DataNode" was used in conditional context - it might have been used in truth evaluation '
    "for `if` statement, logical expression or cast to a boolean. To use conditional execution "
    "via `if` statements you need to specify `enable_conditionals=True` in "
    "`@nvidia.dali.pipeline_def` decorator. You can read more about conditional execution in "
    "specific section of the Pipeline documentation. Bool conversion can be achieved with the "
    "`cast` operator.")


def _never_cancelled() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class IterationContext:
    """What an operator needs to know about the iteration it computes.

    `is_cancelled` lets an operator that waits (for fed data, for workers) give up when the
    pipeline is reset or shut down while the iteration is in flight.
    """

    iteration: int
    epoch_idx: int
    batch_size: int
    is_cancelled: Callable[[], bool] = _never_cancelled


class DataNode(DataNodeOperators):
    """One output of an operator: what `fn.*` functions take and return while a graph is defined.

    DataNodes are symbolic: they hold no data. `device` is "cpu" or "gpu". Python's operators
    on them (`node / 255`) are `graph.arithmetic`'s. As DALI's, the constructor takes a bare
    name (`DataNode("x")`: a CPU node of no operator) and optional `ndim`, `dtype` and
    `layout` a program may know; and a DataNode is no `collections.abc` instance (not
    Iterable: see `graph.not_iterable`).
    """

    __slots__ = ("device", "dtype", "index", "layout", "name", "ndim", "source")
    # Where programs import it from (and where reprs, errors and pickles name it), as DALI's
    # is `nvidia.dali.pipeline.DataNode`.
    __module__ = "dali_lite.pipeline"

    def __init__(self, name: str, device: str = "cpu", source: Operator | None = None,
                 index: int = 0, ndim: int | None = None, dtype: Any = None,
                 layout: str | None = None) -> None:
        self.name = name
        self.device = device
        self.source = source
        self.index = index
        self.ndim = ndim
        self.dtype = dtype
        self.layout = layout

    def gpu(self) -> DataNode:
        """This batch copied to the GPU of the pipeline (see `dali_lite._src.gpu.transfer`)."""
        return _transfer("gpu")(self)

    def cpu(self) -> DataNode:
        """This batch on the CPU: itself for a CPU node; a device-to-host copy for a GPU node."""
        if self.device == "cpu":
            return self
        return _transfer("cpu")(self)

    def shape(self, *, dtype: Any = None, device: str = "cpu") -> DataNode:
        """Each sample's shape, as a 1-D tensor per sample (INT64 unless `dtype`), on
        `device`: a new DataNode, as DALI's `DataNode.shape()` (what `fn.shapes` was)."""
        return _metadata("shape")(self, dtype, device)

    def property(self, key: str, *, device: str = "cpu") -> DataNode:
        """A metadata item of each sample ("layout" or "source_info") as a uint8 tensor of
        the string's bytes, as `fn.get_property` gives it."""
        return _metadata("property")(self, key, device)

    def source_info(self, *, device: str = "cpu") -> DataNode:
        """The "source_info" property (`self.property("source_info")`)."""
        return self.property("source_info", device=device)

    def __repr__(self) -> str:
        # DALI's text, byte for byte but the package name (programs print DataNodes while
        # they debug a graph); the source is shown as DALI shows its operator instance.
        source = ("None" if self.source is None
                  else f"<dali_lite.ops._OperatorInstance object at 0x{id(self.source):x}>")
        text = (f'DataNode(name="{self.name}", device="{self.device}", source="{source}", '
                f'index="{self.index}"')
        if self.ndim is not None:
            text += f", ndim={self.ndim}"
        if self.dtype is not None:
            text += f", dtype={self.dtype}"
        if self.layout is not None:
            text += f", layout={self.layout!r}"
        return text + ")"

    def __bool__(self) -> bool:
        # DALI refuses truth-testing a symbolic node; a silent True would hide user bugs.
        current = PipelineScope.current()
        if current is not None and current._conditionals_enabled:
            # DALI would branch here; dali_lite cannot, and says so after DALI's words.
            raise TypeError(_BOOL_MESSAGE + " (dali_lite does not support conditional "
                            "execution (enable_conditionals=True): branch in an "
                            "fn.python_function instead)")
        raise TypeError(_BOOL_MESSAGE)


# As DALI: a DataNode answers False to `isinstance(node, collections.abc.Iterable)`.
mark_not_iterable(DataNode)


class Operator:
    """A node of the graph. Subclasses implement `run` and describe themselves in `spec`."""

    #: The operator's name in DALI's schema, used in DOT files and serialized pipelines.
    schema_name: ClassVar[str] = "Operator"
    #: Operators that must run even when no pipeline output depends on them.
    always_runs: ClassVar[bool] = False

    def __init__(
        self,
        inputs: Sequence[DataNode],
        num_outputs: int,
        device: str,
        name: str | None = None,
        preserve: bool = False,
    ) -> None:
        for position, node in enumerate(inputs):
            if not isinstance(node, DataNode):
                raise TypeError(
                    f"input {position} of {self.schema_name} must be a DataNode (an output of "
                    f"another operator), got {type(node).__name__}"
                )
        self.id = next(_operator_ids)
        self.inputs = list(inputs)
        self.device = device
        self.preserve = preserve
        current = PipelineScope.current()
        #: Whether `name` is the user's (a checkpoint matches only those).
        self.named_by_user = name is not None
        if name is not None:
            self.name = name
        elif current is not None:
            # As DALI: unnamed operators are numbered per pipeline, so the names a program
            # sees (in feed_input, in errors) do not depend on what other pipelines defined.
            self.name = f"__{self.schema_name}_{current._next_op_id()}"
        else:
            self.name = f"__{self.schema_name}_detached_{self.id}"
        self.outputs = [
            DataNode(self.name if num_outputs == 1 else f"{self.name}[{i}]", device, self, i)
            for i in range(num_outputs)
        ]
        self._init_runtime()
        if current is not None:
            current._register_operator(self)

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    #: The attributes that hold runtime state (queues, locks, the pipeline), not part of an
    #: operator's definition: left out when the operator is pickled (serialization) and made
    #: anew when unpickled. A subclass in any module extends its base's:
    #: ``runtime_attributes = (*Base.runtime_attributes, "_pool")``.
    runtime_attributes: ClassVar[tuple[str, ...]] = ("pipeline",)

    def _init_runtime(self) -> None:
        self._pipeline_ref: weakref.ref[PipelineView] | None = None

    # The pipeline owns its operators, not the other way round: a strong reference here would
    # keep a deleted pipeline (and its worker processes) alive through its own finalizer.
    @property
    def pipeline(self) -> PipelineView | None:
        ref = self.__dict__.get("_pipeline_ref")
        return ref() if ref is not None else None

    @pipeline.setter
    def pipeline(self, pipeline: PipelineView | None) -> None:
        self._pipeline_ref = weakref.ref(pipeline) if pipeline is not None else None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for attribute in (*self.runtime_attributes, "_pipeline_ref"):
            state.pop(attribute, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # Life cycle hooks, called by the pipeline. The defaults do nothing.
    def setup(self, pipeline: PipelineView) -> None:
        """Called once by `Pipeline.build()` before the first iteration."""
        self.pipeline = pipeline

    def reset(self, epoch_idx: int) -> None:
        """Called by `Pipeline.reset()`: forget the old epoch's state."""

    def close(self) -> None:
        """Called when the pipeline shuts down."""

    def checkpoint_state(self) -> int | None:
        """What a checkpoint keeps of the operator's own state once it is set up (a random
        operator's seed), or None: it has none, the pipeline's position is all it needs."""
        return None

    def restore_state(self, state: int) -> None:
        """Take back the `checkpoint_state()` of the checkpointed pipeline's operator (after
        `setup`, before the first iteration)."""
        raise TypeError(f"{self.schema_name} keeps no state in a checkpoint")

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """The operator's arguments, for DOT files and serialization (JSON-friendly values)."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, device={self.device!r})"


def topological_order(
    outputs: Sequence[DataNode], extra_operators: Iterable[Operator]
) -> list[Operator]:
    """Operators needed for `outputs` plus `extra_operators`, each after all of its producers."""
    order: list[Operator] = []
    state: dict[int, int] = {}  # operator id -> 1 while visiting, 2 when placed
    roots = [node.source for node in outputs if node.source is not None]
    roots.extend(extra_operators)
    for root in roots:
        stack: list[tuple[Operator, int]] = [(root, 0)]
        while stack:
            op, next_input = stack.pop()
            if next_input == 0:
                if state.get(op.id) == 2:
                    continue
                if state.get(op.id) == 1:
                    raise ValueError(f"the graph has a cycle through operator {op.name!r}")
                state[op.id] = 1
            if next_input < len(op.inputs):
                stack.append((op, next_input + 1))
                producer = op.inputs[next_input].source
                if producer is not None and state.get(producer.id) != 2:
                    stack.append((producer, 0))
                continue
            state[op.id] = 2
            order.append(op)
    return order
