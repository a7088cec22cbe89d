"""What the operators that move data around promise, checked on dali_lite alone over any
input (hypothesis): flip, transpose, crop, slice and subscripts are NumPy's flips, transposes
and slices (crop with DALI's anchor rounding); pad fills up to the batch's largest shape;
stack and cat are NumPy's; squeeze undoes expand_dims; reshape and reinterpret keep the bytes;
crop_mirror_normalize is a crop, a mirror, a normalization and a transpose to "CHW".

No DALI needed; test_operator_records.py holds the values DALI gave for fixed programs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lite_runs import lite, samples

SETTINGS = settings(max_examples=20, deadline=None)


def _images(dims: int, dtype: str = "uint8", max_side: int = 5) -> st.SearchStrategy[Any]:
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=dims, max_dims=dims, min_side=1,
                                              max_side=max_side))


@SETTINGS
@given(data=st.data(), layout=st.sampled_from(["HWC", "CHW", "DHWC", "FHWC", "CDHW"]),
       horizontal=st.integers(0, 1), vertical=st.integers(0, 1), depthwise=st.integers(0, 1))
def test_flip_reverses_the_named_axes_and_twice_is_the_identity(
        data: st.DataObject, layout: str, horizontal: int, vertical: int,
        depthwise: int) -> None:
    image = data.draw(_images(len(layout)))
    flags = {"horizontal": horizontal, "vertical": vertical}
    if "D" in layout:
        flags["depthwise"] = depthwise
    (once,), (twice,) = samples(lambda fn, types, n: [
        fn.flip(n[0], **flags), fn.flip(fn.flip(n[0], **flags), **flags)], [image],
        layouts=[layout])
    expected = image
    for axis, flag in (("W", "horizontal"), ("H", "vertical"), ("D", "depthwise")):
        if flags.get(flag):
            expected = np.flip(expected, layout.index(axis))
    np.testing.assert_array_equal(once, expected)
    np.testing.assert_array_equal(twice, image)


@SETTINGS
@given(data=st.data(), dims=st.integers(1, 4))
def test_transpose_is_numpys_and_the_inverse_permutation_undoes_it(data: st.DataObject,
                                                                  dims: int) -> None:
    array = data.draw(_images(dims, "int16"))
    perm = data.draw(st.permutations(range(dims)))
    inverse = np.argsort(perm).tolist()
    layout = "ABCD"[:dims]
    (out, twice) = lite(lambda fn, types, n: [
        fn.transpose(n[0], perm=perm), fn.transpose(fn.transpose(n[0], perm=perm),
                                                    perm=inverse)], [array], layouts=[layout])
    np.testing.assert_array_equal(out[0][0], np.transpose(array, perm))
    assert out[2] == "".join(layout[p] for p in perm)
    np.testing.assert_array_equal(twice[0][0], array)
    assert twice[2] == layout


def _anchor(position: float, extent: int, size: int, rounding: str) -> int:
    """DALI's crop anchor: position * (extent - size) in double, from the float32 position,
    rounded half away from zero or truncated."""
    exact = float(np.float32(position)) * (extent - size)
    return math.trunc(exact) if rounding == "truncate" else math.floor(exact + 0.5)


@SETTINGS
@given(data=st.data(), rounding=st.sampled_from(["round", "truncate"]))
def test_a_crop_inside_the_image_is_a_slice_at_dalis_anchor(data: st.DataObject,
                                                           rounding: str) -> None:
    image = data.draw(_images(3, max_side=8))
    height, width = image.shape[:2]
    crop_h, crop_w = data.draw(st.integers(1, height)), data.draw(st.integers(1, width))
    x, y = data.draw(st.floats(0, 1, width=32)), data.draw(st.floats(0, 1, width=32))
    ((out,),) = samples(lambda fn, types, n: fn.crop(
        n[0], crop=(crop_h, crop_w), crop_pos_x=x, crop_pos_y=y, rounding=rounding),
        [image], layouts=["HWC"])
    top, left = _anchor(y, height, crop_h, rounding), _anchor(x, width, crop_w, rounding)
    np.testing.assert_array_equal(out, image[top:top + crop_h, left:left + crop_w])


@SETTINGS
@given(data=st.data(), dims=st.integers(1, 3))
def test_slice_within_bounds_is_numpys(data: st.DataObject, dims: int) -> None:
    array = data.draw(_images(dims, "int32", max_side=6))
    starts = [data.draw(st.integers(0, e)) for e in array.shape]
    ends = [data.draw(st.integers(s, e)) for s, e in zip(starts, array.shape)]
    axes = list(range(dims))
    (by_end,), (by_shape,), (by_rel,) = samples(lambda fn, types, n: [
        fn.slice(n[0], start=starts, end=ends, axes=axes),
        fn.slice(n[0], start=starts, shape=[e - s for s, e in zip(starts, ends)], axes=axes),
        fn.slice(n[0], rel_start=[s / e for s, e in zip(starts, array.shape)],
                 rel_end=[e / x for e, x in zip(ends, array.shape)], axes=axes)],
        [array])
    expected = array[tuple(slice(s, e) for s, e in zip(starts, ends))]
    for out in (by_end, by_shape, by_rel):
        np.testing.assert_array_equal(out, expected)


@SETTINGS
@given(data=st.data())
def test_subscripts_are_numpys(data: st.DataObject) -> None:
    array = data.draw(_images(3, "int16", max_side=5))
    key = []
    for extent in array.shape:
        if data.draw(st.booleans()):
            key.append(data.draw(st.integers(-extent, extent - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-extent - 2, extent + 2))
            step = data.draw(st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2])))
            part = slice(data.draw(bound), data.draw(bound), step)
            # No empty ranges (DALI 2.4 crashes on some, docs/compat.md): the whole axis
            # in that direction instead.
            key.append(part if len(range(extent)[part]) else slice(None, None, step))
    expected = array[tuple(key)]
    ((out,),) = samples(lambda fn, types, n: n[0][tuple(key)], [array])
    np.testing.assert_array_equal(out, expected)


@SETTINGS
@given(batch=st.lists(_images(2, "int16", max_side=4), min_size=1, max_size=3),
       fill=st.integers(-100, 100), align=st.integers(1, 4))
def test_pad_fills_up_to_the_largest_shape(batch: list[np.ndarray], fill: int,
                                          align: int) -> None:
    padded, aligned = samples(lambda fn, types, n: [
        fn.pad(n[0], fill_value=fill), fn.pad(n[0], fill_value=fill, align=align)], batch,
        layouts=["HW"])
    largest = np.max([b.shape for b in batch], axis=0)
    rounded = [-(-e // align) * align for e in largest]
    for image, out, out_aligned in zip(batch, padded, aligned):
        for result, shape in ((out, tuple(largest)), (out_aligned, tuple(rounded))):
            assert result.shape == shape
            h, w = image.shape
            np.testing.assert_array_equal(result[:h, :w], image)
            filled = np.ones(shape, bool)
            filled[:h, :w] = False
            assert (result[filled] == fill).all()


@SETTINGS
@given(data=st.data(), dims=st.integers(1, 3), count=st.integers(1, 3))
def test_stack_and_cat_are_numpys(data: st.DataObject, dims: int, count: int) -> None:
    first = data.draw(_images(dims, "float32"))
    arrays = [first, *(data.draw(hnp.arrays("float32", first.shape)) for _ in range(count - 1))]
    stack_axis, cat_axis = data.draw(st.integers(0, dims)), data.draw(st.integers(0, dims - 1))
    (stacked,), (joined,) = samples(lambda fn, types, n: [
        fn.stack(*n, axis=stack_axis), fn.cat(*n, axis=cat_axis)], *[[a] for a in arrays])
    np.testing.assert_array_equal(stacked, np.stack(arrays, axis=stack_axis))
    np.testing.assert_array_equal(joined, np.concatenate(arrays, axis=cat_axis))


@SETTINGS
@given(data=st.data(), dims=st.integers(0, 3), new=st.integers(1, 3))
def test_squeeze_undoes_expand_dims(data: st.DataObject, dims: int, new: int) -> None:
    array = data.draw(hnp.arrays("uint8", hnp.array_shapes(min_dims=dims, max_dims=dims,
                                                           min_side=2, max_side=4)))
    axes = sorted(data.draw(st.lists(st.integers(0, dims + new - 1), min_size=new,
                                     max_size=new, unique=True)))
    (expanded,), (back,) = samples(lambda fn, types, n: [
        fn.expand_dims(n[0], axes=axes),
        fn.squeeze(fn.expand_dims(n[0], axes=axes), axes=axes)], [array])
    np.testing.assert_array_equal(expanded, np.expand_dims(array, tuple(axes)))
    np.testing.assert_array_equal(back, array)


@SETTINGS
@given(data=st.data())
def test_reshape_and_reinterpret_keep_the_bytes(data: st.DataObject) -> None:
    array = data.draw(_images(3, "int16"))
    shape = data.draw(st.permutations(array.shape))
    (reshaped,), (flat,), (as_bytes,) = samples(lambda fn, types, n: [
        fn.reshape(n[0], shape=list(shape)), fn.reshape(n[0], shape=[-1]),
        fn.reinterpret(n[0], dtype=types.UINT8)], [array])
    assert reshaped.shape == tuple(shape) and flat.shape == (array.size,)
    for out in (reshaped, flat):
        assert out.dtype == array.dtype and out.tobytes() == array.tobytes()
    assert as_bytes.dtype == np.uint8 and as_bytes.tobytes() == array.tobytes()


@SETTINGS
@given(data=st.data(), mirror=st.integers(0, 1))
def test_crop_mirror_normalize_is_crop_flip_normalize_and_transpose(data: st.DataObject,
                                                                   mirror: int) -> None:
    image = data.draw(_images(3, max_side=6).filter(lambda a: a.shape[2] <= 4))
    height, width, channels = image.shape
    crop_h, crop_w = data.draw(st.integers(1, height)), data.draw(st.integers(1, width))
    x, y = data.draw(st.floats(0, 1, width=32)), data.draw(st.floats(0, 1, width=32))
    mean = data.draw(st.lists(st.floats(0, 255, width=32), min_size=channels,
                              max_size=channels))
    std = data.draw(st.lists(st.floats(1, 100, width=32), min_size=channels,
                             max_size=channels))
    ((out,), dtype, layout), = lite(lambda fn, types, n: fn.crop_mirror_normalize(
        n[0], crop=(crop_h, crop_w), crop_pos_x=x, crop_pos_y=y, mirror=mirror, mean=mean,
        std=std), [image], layouts=["HWC"])
    top, left = _anchor(y, height, crop_h, "round"), _anchor(x, width, crop_w, "round")
    window = image[top:top + crop_h, left:left + crop_w].astype(np.float64)
    if mirror:
        window = window[:, ::-1]
    expected = ((window - np.array(mean, np.float64)) / np.array(std, np.float64))
    assert (dtype, layout) == ("float32", "CHW")
    np.testing.assert_allclose(out, expected.transpose(2, 0, 1), rtol=1e-5, atol=1e-5)
