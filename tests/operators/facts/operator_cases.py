"""The programs whose NVIDIA DALI 2.4 outcomes dali_operator_facts.json records: for every
operator family dali_lite has, small fixed inputs (several dtypes and layouts) through many
argument combinations in one pipeline, and the refusals (DALI's exception class, and phrases
its message has).

`record_operator_facts.py` runs them on DALI and writes the record; test_operator_records.py
runs them on dali_lite and compares with the record, without DALI. A case's inputs are built
from `np.arange` (no random generator), so the record's copy of them never drifts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

Graph = Callable[[Any, Any, list[Any]], Any]


@dataclasses.dataclass(frozen=True)
class Case:
    """One pipeline: `graph(fn, types, inputs)` over `feeds` (a batch per input)."""

    graph: Graph
    feeds: tuple[list[np.ndarray], ...] = ()
    layouts: tuple[str, ...] = ()
    #: For a refusal: phrases DALI's message has (the recorder checks them), dali_lite's must.
    words: tuple[str, ...] = ()
    #: Random draws: the record keeps dtypes, layouts and shapes, not values.
    random: bool = False
    #: Float outputs within this relative tolerance (statistics summed in another order).
    rtol: float = 0.0
    batch_size: int | None = None


def _values(shape: tuple[int, ...], dtype: str, step: int = 37, start: int = 0,
            modulo: int = 251) -> np.ndarray:
    """Deterministic, varied values (not a ramp: flips and transposes must show)."""
    flat = (np.arange(int(np.prod(shape))) * step + start) % modulo
    return flat.reshape(shape).astype(dtype)


IMAGES = [_values((5, 6, 3), "uint8"), _values((4, 7, 3), "uint8", start=11)]
PLANARS = [_values((3, 5, 6), "uint8", step=29), _values((3, 4, 4), "uint8", step=31)]
CUBES = [_values((2, 3, 4), "int16", step=7), _values((2, 3, 4), "int16", step=11, start=5)]
RAGGED = [_values((2, 3, 4), "int16", step=13), _values((1, 2, 5), "int16", step=3)]
VOLUMES = [_values((2, 3, 4, 3), "uint8", step=17), _values((3, 2, 5, 3), "uint8", step=19)]
MATRICES = [_values((2, 3), "int32", step=5), _values((2, 3), "int32", step=9, start=4)]
WIDE = [_values((2, 2), "int32", step=3), _values((2, 5), "int32", step=4)]
VECTORS = [_values((3,), "int16", step=5), _values((5,), "int16", step=2), _values((1,), "int16")]
FLOATS = [np.array([[1, 2, 4, 8], [3, 3, 3, 5], [0, -2, 7, 1]], np.float32),
          np.array([[0.5, -1.5, 2.0, 9.0], [4.0, 4.0, -4.0, 1.0], [2.0, 6.0, 2.0, 3.0]],
                   np.float32)]
CAST_FLOATS = [np.array([-70000.9, -300.7, -129.5, -128.5, -2.5, -1.5, -0.5, 0.0, 0.4, 0.5,
                         1.5, 2.5, 127.5, 254.5, 255.5, 300.2, 32767.5, 65535.5, 70000.9,
                         # float16 ties: DALI rounds them away from zero, not to even
                         2317, -2317, 2049, 1.00048828125], np.float32)]
CAST_INTS = [np.array([-70000, -129, -128, -1, 0, 1, 127, 128, 255, 256, 32768, 65536, 70000,
                       2317, 2321, -2317, 16777217, 16777219], np.int32)]
TYPES = ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16",
         "FLOAT", "FLOAT64", "BOOL")
CONSTANT_TYPES = tuple(t for t in TYPES if t != "FLOAT64")
NUMERIC = tuple(t for t in TYPES if t not in ("FLOAT16", "BOOL"))
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def _i32(*values: int) -> list[np.ndarray]:
    return [np.array(v, np.int32) for v in values]


def _f32(*values: Any) -> list[np.ndarray]:
    return [np.array(v, np.float32) for v in values]


def _math(fn: Any) -> Any:
    """The library's `math` module (nvidia.dali.math or dali_lite.math)."""
    return __import__(fn.__name__.rsplit(".", 1)[0] + ".math", fromlist=["clamp"])


CASES: dict[str, Case] = {
    # ------------------------------------------------------------------ conversion
    "cast floats to every type": Case(
        lambda fn, types, n: [fn.cast(n[0], dtype=getattr(types, t)) for t in TYPES],
        (CAST_FLOATS,)),
    "cast ints to every type": Case(
        lambda fn, types, n: [fn.cast(n[0], dtype=getattr(types, t)) for t in TYPES],
        (CAST_INTS,)),
    "cast_like and copy": Case(
        lambda fn, types, n: [fn.cast_like(n[0], n[1]), fn.copy(n[0]), fn.cast_like(n[1], n[0])],
        (MATRICES, FLOATS[:1] * 2), ("HW", "XY")),
    "cast without dtype": Case(lambda fn, types, n: fn.cast(n[0]), (MATRICES,),
                               words=("Not all required arguments", '"dtype"')),
    "copy without input": Case(lambda fn, types, n: fn.copy(), (MATRICES,),
                               words=("expects from 1 to 1 inputs, but received 0",)),
    # ------------------------------------------------------------------ arithmetic
    "arithmetic expressions": Case(
        lambda fn, types, n: [n[0] + n[1], n[0] - n[1], n[0] * 3, n[0] // 4, n[0] % 4,
                              n[0] / n[1], -n[0], n[0] ** 2, n[0] == n[1], n[0] < 30,
                              n[0] & 6, n[0] >> 1, _math(fn).clamp(n[0], 10, 40),
                              _math(fn).abs(n[0] - 30), _math(fn).sqrt(n[1]),
                              _math(fn).min(n[0], n[1]), _math(fn).floor(n[1] / 4)],
        (MATRICES, [m + 1 for m in MATRICES]), ("HW", "HW"), rtol=1e-6),
    # ------------------------------------------------------------------ dimensions
    "expand_dims": Case(lambda fn, types, n: [
        fn.expand_dims(n[0], axes=[0]), fn.expand_dims(n[0], axes=0, new_axis_names="F"),
        fn.expand_dims(n[0], axes=[0, 3], new_axis_names="FC"),
        fn.expand_dims(n[0], axes=[1, 0], new_axis_names="FC"),
        fn.expand_dims(n[0], axes=[2], new_axis_names="C"), fn.expand_dims(n[0], axes=[])],
        (MATRICES,), ("HW",)),
    "expand_dims past the end": Case(lambda fn, types, n: fn.expand_dims(n[0], axes=[3]),
                                     (MATRICES,), ("HW",), words=(
                                         "Data has not enough dimensions to add new axes",)),
    "squeeze": Case(lambda fn, types, n: [
        fn.squeeze(n[0], axes=[0]), fn.squeeze(n[0], axes=[0, 2]), fn.squeeze(n[0], axes=[2, 0]),
        fn.squeeze(n[0], axis_names="F"), fn.squeeze(n[0], axis_names="CF"),
        fn.squeeze(n[0], axes=[])],
        ([_values((1, 2, 1, 3), "uint8"), _values((1, 4, 1, 2), "uint8", step=5)],), ("FHCW",)),
    "squeeze of a long axis": Case(lambda fn, types, n: fn.squeeze(n[0], axes=[1]),
                                   ([_values((1, 2, 1, 3), "uint8")],), ("FHCW",),
                                   words=("The volume of the new shape should match the "
                                          "one of the original shape",)),
    "transpose": Case(lambda fn, types, n: [
        fn.transpose(n[0], perm=[2, 0, 1]), fn.transpose(n[0], perm=(1, 2, 0)),
        fn.transpose(n[0], perm=[0, 2, 1]), fn.transpose(n[0], perm=[1, 0, 2]),
        fn.transpose(n[0], perm=[2, 0, 1], transpose_layout=False),
        fn.transpose(n[0], perm=[2, 0, 1], output_layout="ABC"), fn.transpose(n[0]),
        fn.transpose(n[1], perm=[1, 0])], (RAGGED, WIDE), ("HWC", "XY")),
    "transpose with a repeated axis": Case(
        lambda fn, types, n: fn.transpose(n[0], perm=[0, 1, 1]), (CUBES,), ("HWC",),
        words=("Invalid permutation",)),
    # ------------------------------------------------------------------ joining
    "cat": Case(lambda fn, types, n: [
        fn.cat(n[0], n[1]), fn.cat(n[0], n[1], axis=1), fn.cat(n[0], n[1], axis=-1),
        fn.cat(n[0], n[1], axis_name="W"), fn.cat(n[0], n[0], n[1], axis=1), fn.cat(n[0])],
        (MATRICES, [m * 2 for m in MATRICES]), ("HW", "HW")),
    "cat of differing shapes": Case(
        lambda fn, types, n: fn.cat(n[0], n[1]), (MATRICES, WIDE), ("HW", "HW"),
        words=("Concatenated tensors can differ in size only in the concatenation axis (0)",)),
    "stack": Case(lambda fn, types, n: [
        fn.stack(n[0], n[1]), fn.stack(n[0], n[1], axis=1), fn.stack(n[0], n[1], axis=2),
        fn.stack(n[0], n[1], axis=-1), fn.stack(n[0], n[1], axis_name="C"),
        fn.stack(n[0], n[1], axis=1, axis_name="C"), fn.stack(n[0], n[0], n[1], axis=1)],
        (MATRICES, [m * 2 for m in MATRICES]), ("HW", "HW")),
    "stack past the end": Case(lambda fn, types, n: fn.stack(n[0], n[1], axis=3),
                               (MATRICES, MATRICES), ("HW", "HW"),
                               words=("Invalid axis argument, 3 for 2-D tensors",)),
    # ------------------------------------------------------------------ padding and flips
    "pad vectors": Case(lambda fn, types, n: [
        fn.pad(n[0], fill_value=-1), fn.pad(n[0], fill_value=-1, shape=7),
        fn.pad(n[0], fill_value=-1, align=4), fn.pad(n[0], fill_value=-1, shape=1, align=2),
        fn.pad(n[0], shape=0), fn.pad(n[0], fill_value=2.7), fn.pad(n[0], fill_value=300.5),
        fn.pad(n[0], axis_names="X", fill_value=9)], (VECTORS,), ("X",)),
    "pad planes": Case(lambda fn, types, n: [
        fn.pad(n[0]), fn.pad(n[0], shape=4, fill_value=5), fn.pad(n[0], align=4),
        fn.pad(n[0], shape=[4, -1], fill_value=7), fn.pad(n[0], axes=[1, 0], shape=[6, 1]),
        fn.pad(n[0], axis_names="W", align=3, fill_value=-2), fn.pad(n[0], align=[3, 2])],
        (WIDE,), ("HW",)),
    # a shape smaller than the sample's leaves the sample as it is
    "pad to a smaller shape": Case(lambda fn, types, n: fn.pad(n[0], shape=[1, 1]), (WIDE,),
                                   ("HW",)),
    "pad with align 0": Case(lambda fn, types, n: fn.pad(n[0], align=0), (VECTORS,), ("X",),
                             words=("Values of `align` argument must be positive",)),
    "flip images": Case(lambda fn, types, n: [
        fn.flip(n[0]), fn.flip(n[0], horizontal=0, vertical=1), fn.flip(n[0], depthwise=1),
        fn.flip(n[0], horizontal=1, vertical=1), fn.flip(n[0], horizontal=n[1], vertical=n[2]),
        fn.flip(n[0], horizontal=2, vertical=-1)],
        (IMAGES, _i32(1, 0), _i32(0, 1)), ("HWC", "", "")),
    "flip planar images": Case(lambda fn, types, n: [
        fn.flip(n[0]), fn.flip(n[0], horizontal=0, vertical=1)], (PLANARS,), ("CHW",)),
    "flip volumes and sequences": Case(lambda fn, types, n: [
        fn.flip(n[0], depthwise=1, horizontal=0), fn.flip(n[0], depthwise=1, vertical=1),
        fn.flip(n[1], vertical=1, horizontal=0), fn.flip(n[1], depthwise=1, horizontal=0)],
        (VOLUMES, VOLUMES), ("DHWC", "FHWC")),
    "flip without a width": Case(lambda fn, types, n: fn.flip(n[0]), (VECTORS,), ("X",),
                                 words=("layout",)),
    # ------------------------------------------------------------------ normalize
    "normalize computed statistics": Case(lambda fn, types, n: [
        fn.normalize(n[0]), fn.normalize(n[0], axes=0), fn.normalize(n[0], axes=[1]),
        fn.normalize(n[0], axis_names="Y"), fn.normalize(n[0], batch=True),
        fn.normalize(n[0], axes=0, batch=True), fn.normalize(n[0], ddof=1),
        fn.normalize(n[0], epsilon=0.5), fn.normalize(n[0], ddof=2, epsilon=0.1),
        fn.normalize(n[0], mean=1.5), fn.normalize(n[0], stddev=2),
        fn.normalize(n[0], stddev=2, epsilon=1),
        fn.normalize(n[0], mean=1.5, stddev=2, scale=3, shift=1),
        fn.normalize(n[0], scale=3, shift=1)], (FLOATS,), ("XY",), rtol=2e-6),
    "normalize given statistics and types": Case(lambda fn, types, n: [
        fn.normalize(n[0], mean=n[1], stddev=n[2]),
        fn.normalize(n[0], mean=45, stddev=20, scale=30, shift=128, dtype=types.UINT8),
        fn.normalize(n[0], mean=45, stddev=20, scale=30, dtype=types.INT16),
        fn.normalize(n[0], mean=45, stddev=20, scale=60, shift=-3, dtype=types.INT8)],
        ([_values((2, 4), "uint8", step=41), _values((2, 4), "uint8", step=13)],
         _f32([[3]], [[100]]), _f32([[2]], [[0.5]])), ("XY", "", ""), rtol=2e-6),
    "normalize an axis past the end": Case(lambda fn, types, n: fn.normalize(n[0], axes=[2]),
                                           (FLOATS,), ("XY",), words=(
                                               "axis index 2 is out of valid range 0..1",)),
    # ------------------------------------------------------------------ slice and subscripts
    "slice given in elements": Case(lambda fn, types, n: [
        fn.slice(n[0], start=[1, 2], end=[3, 4]), fn.slice(n[0], start=[1], end=[2], axes=[1]),
        fn.slice(n[0], start=[0, 1], shape=[2, 3]), fn.slice(n[0], rel_start=[0.5, 0.25],
                                                             rel_shape=[0.5, 0.5]),
        fn.slice(n[0], start=[1], end=[3], axis_names="W"),
        fn.slice(n[0], n[1], n[2], normalized_anchor=False, normalized_shape=False),
        fn.slice(n[0], n[3], n[4]), fn.slice(n[0], n[3], n[4], axes=[0, 1])],
        (IMAGES, _i32([1, 1], [2, 0]), _i32([2, 3], [3, 2]), _f32([0.2, 0.3], [0.0, 0.5]),
         _f32([0.6, 0.5], [0.5, 0.25])), ("HWC", "", "", "", "")),
    "slice out of bounds": Case(lambda fn, types, n: [
        fn.slice(n[0], start=[-2, -1], end=[4, 9], out_of_bounds_policy=policy, fill_values=7)
        for policy in ("pad", "trim_to_shape")] + [
        fn.slice(n[0], start=[-1], end=[2], axes=[1], out_of_bounds_policy="pad",
                 fill_values=[1, 2, 3], dtype=types.FLOAT)], (IMAGES,), ("HWC",)),
    "slice out of bounds refused": Case(
        lambda fn, types, n: fn.slice(n[0], start=[-3, -2], end=[9, 8]), (IMAGES,), ("HWC",),
        words=("Slice can't be placed out of bounds with current policy",)),
    "slice ends before it starts": Case(
        lambda fn, types, n: fn.slice(n[0], start=[3, 1], end=[1, 2], axes=[0, 1]), (IMAGES,),
        ("HWC",), words=("end coordinates can't be before start coordinates. Got: start=3 end=1",)),
    "subscripts": Case(lambda fn, types, n: [
        n[0][0], n[0][-1], n[0][0, 1], n[0][1:], n[0][:, 1], n[0][:, ::2], n[0][:, ::-1],
        n[0][:, 1:3], n[0][:, -2:], n[0][:, -10:10], n[0][:, 2:0:-1, ::-2], n[0][:, :, 1],
        n[0][1, :, 1:3]], (CUBES,), ("HWC",)),
    "subscript out of range": Case(lambda fn, types, n: n[0][2], (CUBES,), ("HWC",),
                                   words=("out of range",)),
    # ------------------------------------------------------------------ crop
    "crop windows": Case(lambda fn, types, n: [
        fn.crop(n[0], crop=(2, 3)), fn.crop(n[0], crop=(2.7, 3.9)),
        fn.crop(n[0], crop_h=2.7, crop_w=3.5), fn.crop(n[0], crop=(3, 3), crop_pos_x=n[1],
                                                       crop_pos_y=n[2]),
        fn.crop(n[0], crop=n[3]), fn.crop(n[0], crop=(2, 2), dtype=types.FLOAT)] + [
        fn.crop(n[0], crop=(1, 2), crop_pos_x=p, crop_pos_y=p, rounding=r)
        for p in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0) for r in ("round", "truncate")],
        (IMAGES, _f32(0.2, 0.8), _f32(1.0, 0.0), _f32([2, 3], [4, 1])), ("HWC", "", "", "")),
    "crop planar images, sequences and volumes": Case(lambda fn, types, n: [
        fn.crop(n[0], crop=(2, 3)), fn.crop(n[0], crop=(3, 4), crop_pos_x=0.2, crop_pos_y=0.9),
        fn.crop(n[1], crop=(2, 3)), fn.crop(n[2], crop=(2, 2, 3)),
        fn.crop(n[2], crop_d=1, crop_h=2, crop_w=3, crop_pos_z=1.0)],
        (PLANARS, VOLUMES, VOLUMES), ("CHW", "FHWC", "DHWC")),
    "crop outside the image": Case(lambda fn, types, n: [
        fn.crop(n[0], crop=(7, 9), out_of_bounds_policy="pad", fill_values=[7, 8, 9]),
        fn.crop(n[0], crop=(7, 9), crop_pos_x=0, crop_pos_y=1, out_of_bounds_policy="pad",
                fill_values=3),
        fn.crop(n[0], crop=(7, 9), out_of_bounds_policy="trim_to_shape")], (IMAGES,), ("HWC",)),
    "crop outside the image refused": Case(lambda fn, types, n: fn.crop(n[0], crop=(8, 11)),
                                           (IMAGES,), ("HWC",),
                                           words=("Slice can't be placed out of bounds",)),
    # ------------------------------------------------------------------ crop_mirror_normalize
    "crop_mirror_normalize": Case(lambda fn, types, n: [
        fn.crop_mirror_normalize(n[0]), fn.crop_mirror_normalize(n[0], mean=MEAN, std=STD),
        fn.crop_mirror_normalize(n[0], mean=MEAN, std=STD, output_layout="HWC",
                                 dtype=types.FLOAT16),
        fn.crop_mirror_normalize(n[0], mean=MEAN, std=STD, scale=64, shift=128,
                                 dtype=types.UINT8),
        fn.crop_mirror_normalize(n[0], mean=[1, 2, 3], std=3.3, scale=50.3, shift=-3.3,
                                 dtype=types.INT8),
        fn.crop_mirror_normalize(n[0], output_layout="WCH"),
        fn.crop_mirror_normalize(n[0], crop=(3, 3), crop_pos_x=0.2, mirror=1, mean=3),
        fn.crop_mirror_normalize(n[0], mirror=n[1], output_layout="HWC", mean=MEAN),
        fn.crop_mirror_normalize(n[0], mirror=1, crop=(4, 4), crop_pos_y=0.9,
                                 rounding="truncate", dtype=types.UINT8),
        fn.crop_mirror_normalize(n[0], pad_output=True, mean=[1, 2, 3]),
        fn.crop_mirror_normalize(n[0], crop=(7, 9), crop_pos_x=0.1, mirror=1,
                                 out_of_bounds_policy="pad", fill_values=[300.6, -2.5, 7],
                                 dtype=types.UINT8, mean=[1, 2, 3])],
        (IMAGES, _i32(1, 0)), ("HWC", ""), rtol=1e-6),
    "crop_mirror_normalize of planar images": Case(lambda fn, types, n: [
        fn.crop_mirror_normalize(n[0], crop=(2, 3), mirror=1, mean=[1, 2, 3], std=2),
        fn.crop_mirror_normalize(n[0], output_layout="HWC", dtype=types.UINT8)],
        (PLANARS,), ("CHW",), rtol=1e-6),
    "crop_mirror_normalize with too many means": Case(
        lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean=[1, 2, 3, 4]), (IMAGES,),
        ("HWC",), words=("mean",)),
    # ------------------------------------------------------------------ reshape, reinterpret
    "reshape": Case(lambda fn, types, n: [
        fn.reshape(n[0], shape=[6, 4]), fn.reshape(n[0], shape=[-1]),
        fn.reshape(n[0], shape=[4, -1], layout="AB"), fn.reshape(n[0], shape=[4, 3, 2]),
        fn.reshape(n[0], layout="ABC"), fn.reshape(n[0], src_dims=[2, 1, 0]),
        fn.reshape(n[0], src_dims=[0, 1, 2, -1], shape=[2, 3, 4, 1]),
        fn.reshape(n[0], rel_shape=[0.5, 2, 1]), fn.reshape(n[0], rel_shape=[0.5, -1]),
        fn.reinterpret(n[0], dtype=types.UINT8), fn.reinterpret(n[0], dtype=types.INT32,
                                                                shape=[2, 6]),
        fn.reinterpret(n[0], dtype=types.UINT16, shape=[-1])], (CUBES,), ("HWC",)),
    "reshape to another volume": Case(lambda fn, types, n: fn.reshape(n[0], shape=[5, 5]),
                                      (CUBES,), ("HWC",), words=("Input and output samples",)),
    # ------------------------------------------------------------------ metadata
    "shapes and properties": Case(lambda fn, types, n: [
        fn.shapes(n[0]), fn.shapes(n[0], dtype=types.INT32), fn.shapes(n[0], dtype=types.FLOAT),
        fn.shapes(fn.transpose(n[0])), fn.get_property(n[0], key="layout"),
        fn.get_property(fn.transpose(n[0], perm=[1, 0, 2]), key="layout"),
        fn.get_property(n[0], key="source_info")], (RAGGED,), ("HWC",)),
    "shapes as uint8": Case(lambda fn, types, n: fn.shapes(n[0], dtype=types.UINT8), (RAGGED,),
                            ("HWC",), words=("requested: uint8",)),
    # ------------------------------------------------------------------ constant
    "constants": Case(lambda fn, types, n: [
        fn.constant(fdata=1.5), fn.constant(fdata=[1.5, 2]), fn.constant(idata=[1, 2, 3]),
        fn.constant(idata=[1, 2, 3, 4, 5, 6], shape=[2, 3], layout="HW"),
        fn.constant(idata=7, shape=[2, 2]), fn.constant(idata=[2 ** 40]),
        fn.constant(fdata=0.1, shape=[1, 2], dtype=types.INT32)] + [
        fn.constant(idata=[-1, 2, 300, 70000], dtype=getattr(types, t)) for t in CONSTANT_TYPES] + [
        fn.constant(fdata=[-1.5, 2.5, 300.7, 1e10], dtype=getattr(types, t))
        for t in CONSTANT_TYPES], (VECTORS,)),
    "constant of float64": Case(lambda fn, types, n: fn.constant(idata=1, dtype=types.FLOAT64),
                                (VECTORS,), words=("Unsupported type: double",)),
    "constant of the wrong count": Case(
        lambda fn, types, n: fn.constant(idata=[1, 2, 3], shape=[2, 2]), (VECTORS,),
        words=("The number of values does not match the shape specified",)),
    # ------------------------------------------------------------------ random
    "random dtypes, shapes and layouts": Case(lambda fn, types, n: [
        fn.random.uniform(), fn.random.normal(), fn.random.coin_flip(), fn.random.choice(5),
        fn.random.choice([1.5, 2.5]), fn.random.choice(np.array([3, 4], np.uint8)),
        fn.random.uniform(shape=[2, 3]), fn.random.normal(shape=2),
        fn.random.coin_flip(shape=(1, 2)), fn.random.uniform(shape=[0, 2]),
        fn.random.uniform(values=[1, 2, 5]), fn.random.uniform(n[0]), fn.random.normal(n[0]),
        fn.random.coin_flip(n[0]), fn.random.choice(3, n[0]),
        fn.random.choice(np.arange(6, dtype=np.int32).reshape(3, 2), shape=[4]),
        fn.random.uniform(shape=n[1]), fn.random.coin_flip(shape=n[1], dtype=types.UINT8)] + [
        fn.random.uniform(dtype=getattr(types, t), shape=2) for t in NUMERIC] + [
        fn.random.normal(dtype=getattr(types, t)) for t in NUMERIC],
        ([_values((2, 3), "uint8"), _values((1, 4), "uint8")], _i32([1, 2], [2, 1])),
        ("HW", ""), random=True),
    "random draws with one outcome": Case(lambda fn, types, n: [
        fn.random.coin_flip(probability=1.0, shape=4),
        fn.random.coin_flip(probability=0.0, shape=4, dtype=types.BOOL),
        fn.random.coin_flip(probability=n[0], shape=3, dtype=types.UINT8),
        fn.random.normal(mean=3.0, stddev=0.0, shape=2),
        fn.random.normal(mean=1.5, stddev=0, dtype=types.INT32),
        fn.random.normal(mean=300, stddev=0, dtype=types.UINT8),
        fn.random.normal(mean=n[1], stddev=0.0, shape=2),
        fn.random.uniform(values=[2.5], shape=3, dtype=types.INT32),
        fn.random.uniform(values=300, shape=3, dtype=types.UINT8),
        fn.random.uniform(range=[2.1, 2.9], shape=4, dtype=types.INT32),
        fn.random.uniform(range=[-2.7, -2.1], shape=4, dtype=types.INT8),
        fn.random.choice(3, p=[0.0, 0.0, 1.0], shape=4),
        fn.random.choice(np.arange(6, dtype=np.int32).reshape(3, 2), p=[0, 1, 0])],
        (_f32(0, 1), _f32(0, 10))),
    "random range reversed": Case(lambda fn, types, n: fn.random.uniform(range=[1, 0]),
                                  batch_size=2, words=("Invalid range [1, 0).",)),
    "random choice p not summing to 1": Case(
        lambda fn, types, n: fn.random.choice(3, p=[0.5, 0.5, 0.5]), batch_size=2,
        words=("Sum of probabilities must be 1.0, but got 1.5",)),
}
