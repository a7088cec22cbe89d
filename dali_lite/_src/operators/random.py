"""Random numbers: `fn.random.uniform`, `normal`, `coin_flip` and `choice`.

Each operator draws, in every iteration, from a NumPy `Generator` (PCG64) seeded with the
operator's seed and the iteration's place (epoch, iteration): iteration k of epoch e gives
the same values whatever came before, so that they depend neither on prefetching nor on worker
processes (they are drawn in the executor, in this process), a restored checkpoint goes on with
the values the original would have drawn, and `reset()` starts a new epoch of new values, as
DALI's generators run on. How the operator's seed is chosen (`seed=`, else the pipeline's) is
`random_support`'s. The bits are not DALI's; the distributions, dtypes, shapes and errors are.

A batch is drawn in one generator call: per-sample arguments and shapes are spread over the
flat draw with `np.repeat`. Outputs are drawn on the host and, for `device="gpu"`, copied to
the GPU.

DALI's names from before `fn.random` live here too: `fn.uniform`, `fn.coin_flip`,
`fn.normal_distribution`, `ops.Uniform`, `ops.CoinFlip`, `ops.NormalDistribution`, and their
twins in `fn.hidden` and `ops.hidden`. Old programs and tutorials call them; DALI 2.4 still
runs them with a DeprecationWarning ("`nvidia.dali.fn.uniform` is now deprecated. Use
`nvidia.dali.fn.random.uniform` instead."), worded for `fn` or `ops`
(`OperatorSchema.replaced_by`). Each is the operator it names under DALI's old schema.

Why one module: the four operators are one family, drawn one way (`RandomOperator`: the seed,
the iteration's place, one generator call per batch), and DALI's old names are those very
classes under other schemas. Apart, the old names were a module that only renamed this one's
classes (moved out once to keep under a line cap, and back since).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, array_module, output_batch
from dali_lite._src.operators.conversion import convert
from dali_lite._src.operators.random_support import (
    choice_probabilities,
    dtype_of,
    float_scalar,
    operator_seed,
    probabilities,
    probability_argument,
    range_argument,
    range_rows,
    seed_argument,
    shape_argument,
    type_name,
    values_argument,
)
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.types.enums import DALIEnum

__all__ = ["Choice", "CoinFlip", "Normal", "Uniform"]

_NUMERIC = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
            "float32", "float64")
_SHAPE = Argument("shape", None, tensor=True, convert=shape_argument,
                  type_name="an int or a list of ints")
_SHAPE_DOC = ("The shape of the generated data is given by `shape`, or is the shape of the "
              "`shape_like` input's samples; with neither, a single value per sample is "
              "generated.")


def _dtype(supported: Sequence[str]) -> Argument:
    return Argument("dtype", None, convert=dtype_of(supported),
                    type_name="a ':class:`nvidia.dali.types.DALIDataType`'")


def _repeat(values: Any, counts: np.ndarray) -> Any:
    """A per-sample value spread over the flat draw (a scalar stays a scalar)."""
    return np.repeat(np.asarray(values), counts) if isinstance(values, (list, np.ndarray)) \
        else values


class RandomOperator(BuiltinOperator):
    """A random operator: its seed, its output shapes, and the batch it assembles."""

    # DALI's random operators check their arguments when they first run.
    argument_errors_at_run: ClassVar[bool] = True

    runtime_attributes: ClassVar[tuple[str, ...]] = (*BuiltinOperator.runtime_attributes,
                                                      "stream_seed")

    def __init__(self, inputs: Sequence[Any], arguments: dict[str, Any], *,
                 seed: Any = None, **common: Any) -> None:
        super().__init__(inputs, arguments, seed=seed_argument(seed, self._what("seed")),
                         **common)
        self.shape_like = self.input_count == len(self.schema.inputs)
        has_shape = ("shape" in self.argument_inputs
                     or self.constant_arguments.get("shape") is not None)
        if self.shape_like and has_shape:
            self._defer(RuntimeValueError(
                'Providing argument "shape" is incompatible with providing a shape-like input '
                f"({self.schema.display_name}: give one of them)"))

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self.stream_seed: int | None = None

    def setup(self, pipeline: Any) -> None:
        super().setup(pipeline)
        self.stream_seed = operator_seed(self.seed, pipeline)

    def checkpoint_state(self) -> int | None:
        # The draws of an iteration depend only on the seed and the iteration's place, so
        # the seed (the system's entropy when no seed was given) is all a checkpoint needs.
        return self.stream_seed

    def restore_state(self, state: int) -> None:
        self.stream_seed = state

    def generator(self, ctx: IterationContext) -> np.random.Generator:
        """The generator of this operator in `ctx`'s iteration."""
        if self.stream_seed is None:  # never set up in a pipeline
            self.stream_seed = operator_seed(self.seed, _NoPipeline())
        sequence = np.random.SeedSequence(self.stream_seed,
                                          spawn_key=(ctx.epoch_idx, ctx.iteration))
        return np.random.Generator(np.random.PCG64(sequence))

    def sample_shapes(self, inputs: list[InputBatch], arguments: ArgumentValues
                      ) -> list[tuple[int, ...]]:
        """Each output sample's shape: `shape_like`'s, `shape`, or a scalar."""
        if self.shape_like:
            return inputs[-1].shapes()
        if arguments.is_per_sample("shape"):
            shapes = arguments.per_sample("shape")
            if len({len(shape) for shape in shapes}) > 1:
                raise RuntimeValueError(
                    "A tensor list shape must have the same dimensionality for all samples. "
                    f"({self._what('shape')}: the samples ask for the shapes {shapes})")
            return shapes
        shape = arguments["shape"]
        return [() if shape is None else shape] * arguments.batch_size

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "seed": self.seed}

    def output(self, flat: np.ndarray, shapes: list[tuple[int, ...]],
               trailing: tuple[int, ...] = (), layout: str = "") -> Any:
        """The batch of the samples laid one after another in `flat`."""
        xp = array_module(self.device)
        if shapes and all(shape == shapes[0] for shape in shapes):
            data: Any = xp.asarray(flat.reshape((len(shapes), *shapes[0], *trailing)))
        else:
            ends = np.cumsum([math.prod(shape) for shape in shapes])[:-1]
            data = [xp.asarray(part.reshape((*shape, *trailing)))
                    for part, shape in zip(np.split(flat, ends), shapes)]
        return output_batch(data, layout, self.device)


class _NoPipeline:
    seed = None


def _counts(shapes: list[tuple[int, ...]]) -> np.ndarray:
    return np.array([math.prod(shape) for shape in shapes], np.int64)


def _values(arguments: ArgumentValues, name: str) -> Any:
    """A constant argument's value, or a list of its per-sample values."""
    return (arguments.per_sample(name) if arguments.is_per_sample(name)
            else arguments[name])


class Uniform(RandomOperator):
    schema = OperatorSchema(
        name="Uniform", fn_name="uniform", module="random", random=True,
        inputs=("shape_like",), optional_inputs=1,
        doc="Generates random numbers following a uniform distribution.\n\nIt can be configured "
            "to produce a continuous uniform distribution in the `range` [min, max), or a "
            "discrete uniform distribution where any of the specified `values` [v0, v1, ..., "
            "vn] occur with equal probability. The numbers are converted to `dtype` (default "
            "FLOAT) rounding and clamping; for an integer `dtype` the ends of `range` are "
            f"truncated to integers first, as DALI does. {_SHAPE_DOC}",
        arguments=(
            _dtype(_NUMERIC),
            Argument("range", [-1.0, 1.0], tensor=True, convert=range_argument,
                     type_name="a float or a list of floats"),
            _SHAPE,
            Argument("values", None, tensor=True, convert=values_argument,
                     type_name="a float or a list of floats"),
        ),
    )

    def __init__(self, inputs: Sequence[Any], arguments: dict[str, Any], **common: Any) -> None:
        if arguments.get("range") is not None and arguments.get("values") is not None:
            raise RuntimeValueError(
                f"The arguments `range` and `values` of {self.schema.display_name} are mutually "
                "exclusive: give one of them (DALI 2.4 ignores `range` then)")
        super().__init__(inputs, arguments, **common)

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        shapes = self.sample_shapes(inputs, arguments)
        counts = _counts(shapes)
        total = int(counts.sum())
        dtype = arguments["dtype"] or np.dtype(np.float32)
        rng = self.generator(ctx)
        values = _values(arguments, "values")
        if values is not None:
            return [self.output(convert(np, self._discrete(rng, values, counts, total), dtype),
                                shapes)]
        ranges = _values(arguments, "range")
        bounds = range_rows(ranges, self._what("range"))
        if isinstance(ranges, list):  # per sample: one (low, high) row each
            low: Any = bounds[:, 0].astype(np.float64)
            high: Any = bounds[:, 1].astype(np.float64)
        else:
            low, high = float(bounds[0, 0]), float(bounds[0, 1])
        if dtype.kind in "iu":
            # DALI casts the ends to the output type (truncating) before drawing; out of
            # the type's range it wraps them, where they saturate here (docs/compat.md).
            info = np.iinfo(dtype)
            low = np.clip(np.trunc(low), float(info.min), float(info.max))
            high = np.clip(np.trunc(high), float(info.min), float(info.max))
        low, high = _repeat(low, counts), _repeat(high, counts)
        drawn = low + (high - low) * rng.random(total)
        if dtype.kind == "f":
            # [low, high): rounding to float32 may reach `high`; step back below it.
            top = np.asarray(high, dtype)
            drawn = drawn.astype(dtype)
            drawn = np.where(drawn >= top, np.nextafter(top, dtype.type(-np.inf)), drawn)
            return [self.output(drawn.astype(dtype, copy=False), shapes)]
        return [self.output(convert(np, drawn, dtype), shapes)]

    @staticmethod
    def _discrete(rng: np.random.Generator, values: Any, counts: np.ndarray,
                  total: int) -> np.ndarray:
        if not isinstance(values, list):
            picked: np.ndarray = values[rng.integers(0, values.size, total)]
            return picked
        sizes = np.array([v.size for v in values], np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        picks = rng.integers(0, np.repeat(sizes, counts)) if total else np.zeros(0, np.int64)
        return np.concatenate(values)[np.repeat(starts, counts) + picks]


class Normal(RandomOperator):
    schema = OperatorSchema(
        name="Normal", fn_name="normal", module="random", random=True,
        inputs=("shape_like",), optional_inputs=1,
        doc="Generates random numbers following a normal distribution (`mean` + `stddev` * "
            "a standard normal draw, converted to `dtype`, default FLOAT, rounding and "
            f"clamping). {_SHAPE_DOC}",
        arguments=(
            _dtype(_NUMERIC),
            Argument("mean", 0.0, tensor=True, convert=float_scalar, type_name="a float"),
            _SHAPE,
            Argument("stddev", 1.0, tensor=True, convert=float_scalar, type_name="a float"),
        ),
    )

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        shapes = self.sample_shapes(inputs, arguments)
        counts = _counts(shapes)
        dtype = arguments["dtype"] or np.dtype(np.float32)
        mean = _repeat(_values(arguments, "mean"), counts)
        stddev = _repeat(_values(arguments, "stddev"), counts)
        drawn = mean + stddev * self.generator(ctx).standard_normal(int(counts.sum()))
        return [self.output(convert(np, drawn, dtype), shapes)]


class CoinFlip(RandomOperator):
    schema = OperatorSchema(
        name="CoinFlip", fn_name="coin_flip", module="random", random=True,
        inputs=("shape_like",), optional_inputs=1,
        doc="Generates random boolean values following a bernoulli distribution: 1 with "
            "`probability`, else 0, as `dtype` (BOOL, UINT8 or INT32, the default). "
            f"{_SHAPE_DOC}",
        arguments=(
            _dtype(("bool", "uint8", "int32")),
            Argument("probability", 0.5, tensor=True, convert=probability_argument,
                     type_name="a float"),
            _SHAPE,
        ),
    )

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        shapes = self.sample_shapes(inputs, arguments)
        counts = _counts(shapes)
        dtype = arguments["dtype"] or np.dtype(np.int32)
        p = _repeat(_values(arguments, "probability"), counts)
        flips = self.generator(ctx).random(int(counts.sum())) < p
        return [self.output(convert(np, flips, dtype), shapes)]


class Choice(RandomOperator):
    schema = OperatorSchema(
        name="Choice", fn_name="choice", module="random", random=True,
        inputs=("a", "shape_like"), optional_inputs=1, devices=("cpu",),
        doc="Generates a random sample from a given 1D array.\n\nThe probability of selecting "
            "a sample from the input is determined by the corresponding probability specified "
            "in `p` argument (uniform without it). A scalar input `a` (an integer) stands for "
            "``[0, 1, ..., a-1]``; otherwise its elements along the first axis are chosen "
            f"from. The type of the output matches the type of the input. {_SHAPE_DOC}",
        arguments=(
            Argument("p", None, tensor=True, convert=probabilities,
                     type_name="a float or a list of floats"),
            _SHAPE,
        ),
    )

    def __init__(self, inputs: Sequence[Any], arguments: dict[str, Any], **common: Any) -> None:
        # A DALI enum given as `a` is a 0-d tensor of the enum's type, which DALI refuses when
        # it runs; here the enum would be an int32 constant, so remember which enum it was.
        first = inputs[0] if inputs else None
        self.enum_input = type(first).__name__ if isinstance(first, DALIEnum) else None
        super().__init__(inputs, arguments, **common)

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        source = inputs[0]
        sizes = self._sizes(source)
        p_values = choice_probabilities(arguments, sizes.tolist(), self._what("p"))
        shapes = self.sample_shapes(inputs, arguments)
        counts = _counts(shapes)
        total = int(counts.sum())
        rng = self.generator(ctx)
        if p_values is None:
            picks = rng.integers(0, np.repeat(sizes, counts)) if total else \
                np.zeros(0, np.int64)
        else:
            draws = np.split(rng.random(total), np.cumsum(counts)[:-1])
            picks = np.concatenate([_pick(p, u) for p, u in zip(p_values, draws)])
        layout = _choice_layout(source, shapes)
        if source.sample_ndim == 0:
            return [self.output(picks.astype(source.dtype), shapes, layout=layout)]
        trailing = source.samples[0].shape[1:]
        dense = source.dense()
        if dense is not None:
            rows = np.repeat(np.arange(len(shapes)), counts)
            return [self.output(np.asarray(dense)[rows, picks], shapes, trailing, layout)]
        ends = np.cumsum(counts)[:-1]
        chosen = [a[i] for a, i in zip(source.samples, np.split(picks, ends))]
        if len({a.shape[1:] for a in source.samples}) > 1:
            return [output_batch([c.reshape((*s, *c.shape[1:])) for c, s in zip(chosen, shapes)],
                                 layout, self.device)]
        return [self.output(np.concatenate(chosen), shapes, trailing, layout)]

    def _sizes(self, source: InputBatch) -> np.ndarray:
        """How many elements each sample of `a` offers."""
        if source.sample_ndim == 0:
            if self.enum_input is not None or (source.dtype is not None
                                               and source.dtype.kind not in "iu"):
                name = self.enum_input or type_name(source.dtype)
                raise RuntimeTypeError(
                    f"Data type {name} is not supported for 0D inputs. "
                    "Supported types are: uint8, uint16, uint32, uint64, int8, int16, int32, "
                    f"int64. ({self.schema.display_name}: a scalar `a` is the number of values "
                    "to choose from)")
            sizes = np.array([int(a) for a in source.samples], np.int64)
        else:
            sizes = np.array([a.shape[0] for a in source.samples], np.int64)
        for sample, size in enumerate(sizes):
            if size <= 0:
                raise RuntimeValueError(
                    f"Expected positive number of elements for sampling, got: {size} for "
                    f"sample: {sample}. ({self.schema.display_name})")
        return sizes


def _choice_layout(source: InputBatch, shapes: list[tuple[int, ...]]) -> str:
    """DALI's layout of fn.random.choice's output: the input's for one drawn dimension, the
    input's less its first letter (the one chosen along) for a scalar draw, else none."""
    rank = len(shapes[0]) if shapes else 0
    if source.sample_ndim == 0 or not source.layout or rank > 1:
        return ""
    return source.layout if rank == 1 else source.layout[1:]


def _pick(p: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Indices drawn with probabilities `p` (normalised) from uniform draws in [0, 1)."""
    cdf = np.cumsum(p, dtype=np.float64)
    picks = np.searchsorted(cdf, uniform * cdf[-1], side="right")
    indices: np.ndarray = np.minimum(picks, p.size - 1)
    return indices


# ------------------------------------------------------------------ DALI's deprecated names
def _old_names(operator: type[RandomOperator], name: str, fn_name: str
               ) -> tuple[type[RandomOperator], type[RandomOperator]]:
    """DALI's deprecated name for `operator` (`fn.uniform`, `ops.Uniform` for
    `fn.random.uniform`) and its twin in `hidden`: subclasses with the same arguments, whose
    schema gives the warning `fn` and `ops` raise (`OperatorSchema.replaced_by`)."""
    schema = operator.schema
    made = []
    for module, prefix in (("", "Deprecated"), ("hidden", "Hidden")):
        old = replace(schema, name=name, fn_name=fn_name, module=module,
                      replaced_by=schema.fn_path,
                      doc=f"Deprecated: use `fn.{schema.fn_path}`, which this name calls.\n\n"
                          f"{schema.doc}")
        # Named and placed as a class statement would be: serialized pipelines name
        # operator classes by module and name.
        class_name = f"{prefix}{operator.__name__}"
        made.append(type(class_name, (operator,), {
            "schema": old, "__module__": __name__, "__qualname__": class_name}))
    return made[0], made[1]


DeprecatedUniform, HiddenUniform = _old_names(Uniform, "Uniform", "uniform")
DeprecatedNormal, HiddenNormal = _old_names(Normal, "NormalDistribution", "normal_distribution")
DeprecatedCoinFlip, HiddenCoinFlip = _old_names(CoinFlip, "CoinFlip", "coin_flip")


FAMILY: tuple[type[BuiltinOperator], ...] = (
    Uniform, Normal, CoinFlip, Choice,
    DeprecatedUniform, DeprecatedNormal, DeprecatedCoinFlip,
    HiddenUniform, HiddenNormal, HiddenCoinFlip,
)
