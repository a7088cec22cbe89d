"""`BuiltinOperator`: the graph node every built-in operator derives from.

It does what every operator of the table shares: it reads its `OperatorSchema` (class
attribute `schema`), checks the inputs (count, device) and arguments (unknown, missing, a
DataNode where only a constant is allowed) with DALI's errors, turns constant inputs into
DALI's `Constant` nodes, and makes DataNode arguments ("argument inputs") extra inputs of the
node, so that the executor runs their producers first. As in DALI, an array argument of more
than one element (NumPy, or a torch tensor) is an argument input too: a Constant node (64-bit
types narrowed to 32), refused where the argument takes only a constant. Each iteration it
views its input batches as `InputBatch`es and its arguments as `ArgumentValues`, and calls
the subclass's `compute`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from dali_lite._src.cuda.arguments import require_device
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.operators.batches import InputBatch
from dali_lite._src.operators.sample_threads import SampleThreads
from dali_lite._src.operators.schema import OperatorSchema
from dali_lite._src.options import resolved_num_threads
from dali_lite._src.sources.constant import constant_array, constant_node

__all__ = ["ArgumentValues", "BuiltinOperator", "at_run"]


def _is_array_argument(value: Any) -> bool:
    """An argument DALI passes as an argument input though it is no DataNode: a NumPy array
    (or a torch tensor) whose shape is not a scalar's (``()``, ``(1,)``)."""
    is_array = isinstance(value, np.ndarray) or "torch.Tensor" in str(type(value))
    return is_array and tuple(getattr(value, "shape", ())) not in ((), (1,))


class ArgumentValues:
    """An operator's arguments in one iteration: constants, or one value per sample where the
    argument was given as a DataNode."""

    __slots__ = ("_constants", "_per_sample", "batch_size")

    def __init__(self, constants: dict[str, Any], per_sample: dict[str, list[Any]],
                 batch_size: int) -> None:
        self._constants = constants
        self._per_sample = per_sample
        self.batch_size = batch_size

    def __getitem__(self, name: str) -> Any:
        """A constant argument's value (for a per-sample one, use `per_sample`)."""
        if name in self._per_sample:
            raise TypeError(f"argument {name!r} has a value per sample")
        return self._constants[name]

    def is_per_sample(self, name: str) -> bool:
        return name in self._per_sample

    def per_sample(self, name: str) -> list[Any]:
        """The argument's value for each sample of the batch."""
        if name in self._per_sample:
            return self._per_sample[name]
        return [self._constants[name]] * self.batch_size


def at_run(exc: RuntimeError) -> RuntimeError:
    """Mark an argument error that DALI's operator raises when it first runs, not at build
    (`raise at_run(RuntimeValueError(...))` in `check_arguments`)."""
    exc.dali_stage = "run"  # type: ignore[attr-defined]
    return exc


class BuiltinOperator(Operator):
    """A built-in operator: `schema` describes it, `compute` implements it."""

    schema: ClassVar[OperatorSchema]
    runtime_attributes: ClassVar[tuple[str, ...]] = ("pipeline", "_threads")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        schema = cls.__dict__.get("schema")
        if schema is not None:
            cls.schema_name = schema.schema_name

    def __init__(self, inputs: Sequence[Any], arguments: dict[str, Any], *,
                 device: str | None = None, name: str | None = None,
                 preserve: bool = False, seed: int | None = None,
                 bytes_per_sample_hint: Any = None) -> None:
        schema = self.schema
        # An array here is an argument input, which these never take. (A random operator
        # reads its `seed` itself; DALI ignores the seed of an operator that draws nothing.)
        for key, value in (("preserve", preserve),
                           ("bytes_per_sample_hint", bytes_per_sample_hint)):
            if _is_array_argument(value):
                raise TypeError(f"The argument `{key}` for operator `{schema.display_name}` "
                                "should not be a 'DataNode' but a constant.")
        schema.check_input_count(len(inputs))
        nodes = [self._input_node(value, position) for position, value in enumerate(inputs)]
        # DALI checks an operator's arguments together when its C++ operator is made, at
        # build, and some only when it first runs (a RuntimeError either way); only its
        # Python layer refuses while the graph is defined (names, types: TypeError, KeyError,
        # ValueError). A program catching the error around build() or run() must still catch
        # it there, and a graph never built must not raise it: such errors wait (`_defer`).
        self.argument_error: RuntimeError | None = None
        self.argument_error_stage = "build"
        device = self._device(device, nodes)
        try:
            bound = schema.bind(arguments)
        except RuntimeError as exc:  # a required argument missing
            self._defer(exc, "build")
            bound = {}
        constants: dict[str, Any] = {}
        argument_nodes: list[DataNode] = []
        self.argument_inputs: dict[str, int] = {}
        for key, value in bound.items():
            argument = schema.by_name[key]
            if _is_array_argument(value):
                self._check_tensor_argument(key)
                array = constant_array(np.asarray(value))
                value = value if array is None else constant_node(array)
            if isinstance(value, DataNode):
                self._check_tensor_argument(key)
                if value.device != "cpu":
                    raise ValueError(
                        f"Invalid device \"{value.device}\" for argument '{key}' of operator "
                        f"'{schema.display_name}'. Named arguments must be on CPU. (move it "
                        "with .cpu())")
                self.argument_inputs[key] = len(nodes) + len(argument_nodes)
                argument_nodes.append(value)
            else:
                try:
                    constants[key] = (None if value is None
                                      else argument.convert(value, self._what(key)))
                except RuntimeError as exc:
                    self._defer(exc)
        self.constant_arguments = constants
        self.input_count = len(nodes)
        self.seed = -1 if seed is None else seed
        self.bytes_per_sample_hint = bytes_per_sample_hint
        if self.argument_error is None:
            try:
                self.check_arguments(constants)
            except RuntimeError as exc:
                self._defer(exc)
        try:
            count = self.count_outputs(constants)
        except KeyError:  # an argument that failed to convert: the error waits
            count = 1
        super().__init__([*nodes, *argument_nodes], count, device,
                         name=name, preserve=preserve)

    #: Whether DALI's operator checks its constant arguments when it first runs (in its setup
    #: for a batch) rather than when it is built.
    argument_errors_at_run: ClassVar[bool] = False

    def _defer(self, exc: RuntimeError, stage: str | None = None) -> None:
        """Keep the first argument error for the stage DALI raises it at (`stage`, else
        `at_run(exc)`'s mark or the operator's `argument_errors_at_run`, else build)."""
        if self.argument_error is not None:
            return
        if stage is None:
            stage = ("run" if self.argument_errors_at_run or getattr(exc, "dali_stage", None)
                     == "run" else "build")
        self.argument_error, self.argument_error_stage = exc, stage

    # ------------------------------------------------------------ what subclasses provide
    def count_outputs(self, arguments: dict[str, Any]) -> int:
        """How many outputs the operator has, given its constant arguments."""
        return 1

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Check the constant arguments together. Raised when the graph is defined, but a
        RuntimeError (DALI's class for the checks of its C++ operators) when it is built (or
        run: see `at_run`)."""

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        """The output batches (see `batches.output_batch`) of one iteration."""
        raise NotImplementedError

    def setup(self, pipeline: Any) -> None:
        if self.device == "gpu":  # DALI asks for the GPU before it makes the operators
            require_device(pipeline, f"{self.schema.display_name} (device='gpu')")
        if self.argument_error is not None and self.argument_error_stage == "build":
            raise self.argument_error
        super().setup(pipeline)
        self.num_threads = resolved_num_threads(pipeline.num_threads)

    def sample_threads(self) -> SampleThreads | None:
        """Threads for the samples of a batch (the pipeline's `num_threads`, as DALI's CPU
        operators use them), or None with one thread. Ended by `close()`."""
        if getattr(self, "num_threads", 1) < 2:
            return None
        threads = self.__dict__.get("_threads")
        if threads is None:
            threads = self._threads = SampleThreads(self.num_threads, self.name)
        return threads

    def close(self) -> None:
        threads = self.__dict__.pop("_threads", None)
        if threads is not None:
            threads.close()
        super().close()

    # ------------------------------------------------------------------------ machinery
    def _what(self, argument: str) -> str:
        return f"argument `{argument}` of {self.schema.display_name}"

    def _check_tensor_argument(self, key: str) -> None:
        """DALI's TypeError for a DataNode (or an array) given where only a constant goes."""
        argument = self.schema.by_name[key]
        if not argument.tensor:
            raise TypeError(
                f"The argument `{key}` for operator `{self.schema.display_name}` should not "
                f"be a 'DataNode' but {argument.type_name}.")

    def _input_node(self, value: Any, position: int) -> DataNode:
        if isinstance(value, DataNode):
            return value
        # DALI's words first; then what a constant is (a value out of range, DALI's
        # OverflowError, is the cause, as in DALI).
        refusal = (f"when calling operator `{self.schema.display_name}`: expected inputs of "
                   "type 'DataNode', list of 'DataNode' or convertible to constant nodes. "
                   f"Received input `{position}` of type '{type(value).__name__}'. (A constant "
                   "is a number, a list of numbers, a NumPy array, a PyTorch tensor or a "
                   "types.Constant.)")
        try:
            array = constant_array(value)
        except OverflowError as exc:
            raise TypeError(refusal) from exc
        if array is None:
            raise TypeError(refusal)
        return constant_node(array)

    def _device(self, device: str | None, nodes: list[DataNode]) -> str:
        schema = self.schema
        if device is None:
            device = "gpu" if any(n.device == "gpu" for n in nodes) else "cpu"
        if device not in ("cpu", "gpu"):
            raise ValueError(f'Unsupported device type: "{device}". Expected "cpu" or "gpu".')
        if device not in schema.devices:  # DALI finds no such operator when it builds
            self._defer(RuntimeError(
                f"{schema.display_name} has no {device.upper()} implementation (it runs on "
                f"{' and '.join(schema.devices)})"), "build")
            return device
        for position, node in enumerate(nodes):
            if node.device != device:
                raise RuntimeError(
                    f"The input {position} for {device} operator `{schema.display_name}` is "
                    f'stored on incompatible device "{node.device}". Valid device is '
                    f'"{device}". (Move it with .{device}().)')
        return device

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        if self.argument_error is not None:
            raise self.argument_error
        batches = [InputBatch.of(batch) for batch in inputs[:self.input_count]]
        if batches:
            batch_size = len(batches[0])
        elif self.argument_inputs:
            # As DALI: an operator without inputs (fn.random.uniform(range=node)) makes as
            # many samples as its argument inputs have, which may be fewer than the maximum.
            batch_size = len(inputs[next(iter(self.argument_inputs.values()))])
        else:
            batch_size = ctx.batch_size
        per_sample: dict[str, list[Any]] = {}
        for key, index in self.argument_inputs.items():
            argument = self.schema.by_name[key]
            samples = InputBatch.of(inputs[index]).samples
            if len(samples) != batch_size:
                raise ValueError(
                    f"{self._what(key)}: the argument input has {len(samples)} samples, but "
                    f"the batch has {batch_size}")
            per_sample[key] = [argument.convert(np.asarray(s), self._what(key))
                               for s in samples]
        return self.compute(ctx, batches, ArgumentValues(self.constant_arguments, per_sample,
                                                         batch_size))

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"device": self.device}
        for key, value in self.constant_arguments.items():
            if isinstance(value, np.ndarray):
                value = value.tolist()
            spec[key] = value if isinstance(value, (int, float, str, bool, list, tuple,
                                                    type(None))) else repr(value)
        for key in self.argument_inputs:
            spec[key] = "argument input"
        return spec
