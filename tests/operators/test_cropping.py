"""fn.crop and fn.crop_mirror_normalize against NVIDIA DALI: windows, positions and rounding,
layouts (given, defaulted, refused), sequences and volumes, mirroring, the normalization's
float32 arithmetic (compared exactly), channel padding, fill values, types and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_dali")

RNG = np.random.default_rng(11)
IMAGES = [RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8),
          RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)]
SEQUENCE = [RNG.integers(0, 256, (3, 4, 5, 3), dtype=np.uint8)]
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
ONE = [np.array([1], np.int32), np.array([0], np.int32)]


def test_crop_windows_are_dalis() -> None:
    def graph(fn, types, n):
        c = fn.crop
        return [c(n[0], crop=(2, 3)), c(n[0], crop=(2.7, 3.9)), c(n[0], crop_h=2.7, crop_w=3.5),
                c(n[0], crop=(2, 0)), c(n[0], crop=(2, -1)), c(n[0], crop=(1, 2, 2)),
                c(n[0]), c(n[0], crop_pos_x=1.5),  # no window: the position is not read
                *[c(n[0], crop=(1, 2), crop_pos_x=p, crop_pos_y=p, rounding=r)
                  for p in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0) for r in ("round", "truncate")],
                c(n[0], crop=(3, 3), crop_pos_x=n[1], crop_pos_y=n[2]),
                c(n[0], crop=n[3]), c(n[0], crop_h=n[4], crop_w=3)]
    feeds = [IMAGES, [np.array([0.2], np.float32), np.array([0.8], np.float32)],
             [np.array([1.0], np.float32), np.array([0.0], np.float32)],
             [np.array([2, 3], np.float32), np.array([4, 1], np.float32)],
             [np.array([2], np.float32), np.array([3], np.float32)]]
    for layout in ("HWC", "", "CHW"):
        graph_ = graph if layout != "CHW" else (lambda fn, types, n: [
            fn.crop(n[0], crop=(2, 3)), fn.crop(n[0], crop=(3, 5), crop_pos_x=0.2)])
        assert_same(*run_both(graph_, feeds, layouts=[layout, "", "", "", ""]))


def test_crop_of_sequences_and_volumes_is_dalis() -> None:
    def graph(fn, types, n):
        return [fn.crop(n[0], crop=(2, 3)), fn.crop(n[0], crop=(2, 2, 3)),
                fn.crop(n[0], crop_d=2, crop_h=2, crop_w=3, crop_pos_z=1.0)]
    for layout in ("FHWC", "DHWC", "", "FCHW", "CFHW"):  # 4D without a layout: "DHWC"
        assert_same(*run_both(graph, [SEQUENCE], layouts=[layout]))


@pytest.mark.parametrize("policy", ["pad", "constant", "trim_to_shape", "edge", "reflect_101",
                                    "wrap", "error"])
def test_crop_outside_the_image_is_dalis(policy: str) -> None:
    def graph(fn, types, n):
        return [fn.crop(n[0], crop=(8, 11), out_of_bounds_policy=policy, fill_values=[7, 8, 9]),
                fn.crop(n[0], crop=(7, 9), crop_pos_x=0, crop_pos_y=1, dtype=types.FLOAT,
                        out_of_bounds_policy=policy, fill_values=-3.7)]
    dali, lite = run_both(graph, [IMAGES], layouts=["HWC"])
    assert_same(dali, lite, words=[
        "Slice can't be placed out of bounds with current policy. Got: input_shape="
        "{6 x 8 x 3}, slice_anchor={-1 x -2 x 0}, slice_shape={8 x 11 x 3}"]
        if policy == "error" else [])


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_crop_of_any_image_is_dalis(data: st.DataObject) -> None:
    layout = data.draw(st.sampled_from(["HWC", "CHW", "FHWC", ""]))
    dims = len(layout or "HWC")
    shapes = data.draw(st.lists(st.tuples(*[st.integers(1, 7)] * dims), min_size=1,
                                max_size=3))
    dtype = data.draw(st.sampled_from(["uint8", "int16", "float32", "uint64"]))
    batch = [RNG.integers(0, 100, shape).astype(dtype) for shape in shapes]
    kwargs = {"crop": data.draw(st.tuples(st.floats(0, 9, width=32), st.floats(0, 9,
                                                                              width=32))),
              "crop_pos_x": data.draw(st.floats(0, 1, width=32)),
              "crop_pos_y": data.draw(st.floats(0, 1, width=32)),
              "rounding": data.draw(st.sampled_from(["round", "truncate"])),
              "out_of_bounds_policy": data.draw(st.sampled_from(["pad", "trim_to_shape",
                                                                 "error"]))}
    dali, lite = run_both(lambda fn, types, n: fn.crop(n[0], fill_values=3, **kwargs),
                          [batch], layouts=[layout])
    assert_same(dali, lite, words=["Slice can't be placed out of bounds"] if dali.error else [])


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.crop(n[0], crop_h=2), ["`crop_w` and `crop_h` arguments must be "
                                                     "provided together"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), crop_h=2, crop_w=2),
     ["`crop` argument is not compatible with `crop_h`, `crop_w`, `crop_d`"]),
    (lambda fn, types, n: fn.crop(n[0], crop=2), ["`crop` argument should have 2 or 3 elements "
                                                  "depending on the input data shape"]),
    (lambda fn, types, n: fn.crop(n[0], crop_d=2), ["must be provided together"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), rounding="floor"),
     ['``rounding`` value floor is not supported. Supported values are "round", or "truncate".']),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), crop_pos_x=1.5),
     ["Anchor for dimension 1 (1.500000) is out of range [0.0, 1.0]"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), crop_pos_y=-0.1),
     ["Anchor for dimension 0 (-0.100000) is out of range [0.0, 1.0]"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), out_of_bounds_policy="foo"),
     ["Not supported out_of_bounds_policy: foo"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), crop_pos_x=n[1]),
     ['Unexpected type of argument "crop_pos_x". Expected float and got double']),
    (lambda fn, types, n: fn.crop(n[0], crop=n[2]),
     ["requested type: float current buffer type: int32"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(2, 2), dtype=types.INT16),
     ["Not supported output type: int16"]),
    (lambda fn, types, n: fn.crop(n[0], crop=(7, 9), out_of_bounds_policy="pad",
                                  fill_values=[1, 2]),
     ["Multi-channel fill value does not match the number of channels in the output"]),
], ids=["crop_h alone", "crop and crop_h", "one crop value", "crop_d alone", "rounding",
        "position x", "position y", "policy", "position type", "crop type", "output type",
        "fill count"])
def test_crop_refusals_are_dalis(graph: object, words: list[str]) -> None:
    feeds = [IMAGES, [np.array([0.5])] * 2, [np.array([2, 2], np.int32)] * 2]
    assert_same(*run_both(graph, feeds, layouts=["HWC", "", ""]), words=words)


@pytest.mark.parametrize(("layout", "data", "words"), [
    ("XYZ", IMAGES, ['The layout "XYZ" does not match any of the allowed layouts for input 0. '
                     "Valid layouts are:\nHWC\nCHW\nDHWC\nCDHW\nFHWC\nFCHW\nCFHW\nFDHWC\nFCDHW\n"
                     "CFDHW"]),
    ("", [IMAGES[0][:, :, 0].copy()], ["The number of dimensions 2 does not match any of the "
                                       "allowed layouts for input 0."]),
    ("HW", [IMAGES[0][:, :, 0].copy()], ['The layout "HW" does not match any of the allowed']),
])
def test_image_layouts_are_required_as_dali_does(layout: str, data: list[np.ndarray],
                                                  words: list[str]) -> None:
    assert_same(*run_both(lambda fn, types, n: fn.crop(n[0]), [data], layouts=[layout]),
                words=words)
    assert_same(*run_both(lambda fn, types, n: fn.crop_mirror_normalize(n[0]), [data],
                          layouts=[layout]), words=words)


@pytest.mark.parametrize("source", ["uint8", "int16", "uint16", "int32", "float32", "float16"])
def test_normalization_is_dalis_to_the_bit(source: str) -> None:
    images = [(image.astype(np.float32) * 1.37 - 20).astype(source) for image in IMAGES]

    def graph(fn, types, n):
        cmn = fn.crop_mirror_normalize
        return [cmn(n[0]), cmn(n[0], mean=MEAN, std=STD),
                cmn(n[0], mean=MEAN, std=STD, output_layout="HWC", dtype=types.FLOAT16),
                cmn(n[0], mean=MEAN, std=STD, scale=64, shift=128, dtype=types.UINT8),
                cmn(n[0], mean=0.5, std=[0.25, 0.5, 2.0], scale=1 / 3, shift=0.7),
                cmn(n[0], mean=[1, 2, 3], std=3.3, scale=50.3, shift=-3.3, dtype=types.INT8),
                cmn(n[0], dtype=types.UINT8), cmn(n[0], output_layout="WCH")]
    assert_same(*run_both(graph, [images], layouts=["HWC"]))


def test_crop_mirror_and_fill_are_dalis() -> None:
    def graph(fn, types, n):
        cmn = fn.crop_mirror_normalize
        return [cmn(n[0], crop=(3, 3), crop_pos_x=0.2, mirror=1, mean=3),
                cmn(n[0], mirror=n[1], output_layout="HWC", mean=MEAN),
                cmn(n[0], mirror=2, crop=(4, 4), crop_pos_y=0.9, rounding="truncate"),
                cmn(n[0], mirror=True, dtype=types.UINT8),
                cmn(n[0], pad_output=True, mean=[1, 2, 3]),
                cmn(n[0], pad_output=True, mean=[1, 2, 3, 4], output_layout="HWC"),
                cmn(n[0], crop=(8, 11), crop_pos_x=0.1, mirror=1, out_of_bounds_policy="pad",
                    fill_values=[300.6, -2.5, 7], dtype=types.UINT8, mean=[1, 2, 3]),
                cmn(n[0], crop=(8, 11), mirror=n[1], pad_output=True, out_of_bounds_policy="pad",
                    fill_values=[3, 4, 5, 6], dtype=types.INT8, mean=MEAN, std=STD, scale=30),
                cmn(n[0], crop=(7, 9), out_of_bounds_policy="pad", fill_values=5, std=2),
                cmn(n[0], crop=(7, 9), out_of_bounds_policy="trim_to_shape"),
                cmn(n[0], pad_output=True, fill_values=[9, 8, 7, 6], output_layout="HWC"),
                cmn(n[0], mean=n[2], std=n[3], output_layout="HWC")]
    feeds = [IMAGES, ONE, [np.array(MEAN, np.float32), np.array([1, 2, 3], np.float32)],
             [np.array([2], np.float32), np.array([0.5], np.float32)]]
    assert_same(*run_both(graph, feeds, layouts=["HWC", "", "", ""]))


def test_sequences_and_volumes_are_normalized_as_dali_does() -> None:
    def graph(fn, types, n):
        cmn = fn.crop_mirror_normalize
        return [cmn(n[0], output_layout="FCHW", crop=(2, 3), mirror=1, mean=MEAN, std=STD),
                cmn(n[0], output_layout="CFHW", crop=(2, 2, 2), crop_pos_z=0.0),
                cmn(n[0], output_layout="", dtype=types.FLOAT16)]
    assert_same(*run_both(graph, [SEQUENCE], layouts=["FHWC"]))
    assert_same(*run_both(lambda fn, types, n: fn.crop_mirror_normalize(
        n[0], output_layout="CDHW", crop_d=2, crop_h=3, crop_w=2, mirror=1), [SEQUENCE],
        layouts=["DHWC"]))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_crop_mirror_normalize_is_dalis(data: st.DataObject) -> None:
    layout = data.draw(st.sampled_from(["HWC", "CHW", "FHWC"]))
    channels = data.draw(st.integers(1, 4))
    spatial = data.draw(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=1,
                                 max_size=3))
    dtype = data.draw(st.sampled_from(["uint8", "int16", "float32", "float16"]))
    batch = []
    for h, w in spatial:
        shape = {"HWC": (h, w, channels), "CHW": (channels, h, w), "FHWC": (2, h, w, channels)}
        batch.append(RNG.integers(0, 256, shape[layout]).astype(dtype))
    per_channel = st.lists(st.floats(0.5, 200, width=32), min_size=channels,
                           max_size=channels)
    mean = data.draw(st.one_of(st.floats(-10, 200, width=32), per_channel))
    std = data.draw(st.one_of(st.floats(0.5, 100, width=32), per_channel))
    out_layout = "".join(data.draw(st.permutations(layout)))
    kwargs = {"mean": mean, "std": std, "output_layout": out_layout,
              "scale": data.draw(st.floats(0.125, 64, width=32)),
              "shift": data.draw(st.floats(-5, 128, width=32)),
              "mirror": data.draw(st.integers(0, 1)),
              "pad_output": data.draw(st.booleans()),
              "crop": data.draw(st.tuples(st.integers(1, 7), st.integers(1, 7))),
              "crop_pos_x": data.draw(st.floats(0, 1, width=32)),
              "out_of_bounds_policy": data.draw(st.sampled_from(["pad", "error"])),
              "fill_values": data.draw(st.floats(-3, 300, width=32))}
    out = data.draw(st.sampled_from(["FLOAT", "FLOAT16", "UINT8", "INT8"]))
    dali, lite = run_both(lambda fn, types, n: fn.crop_mirror_normalize(
        n[0], dtype=getattr(types, out), **kwargs), [batch], layouts=[layout])
    assert_same(dali, lite, words=["Slice can't be placed out of bounds"] if dali.error else [])


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean=[1, 2]),
     ["The number of per-channel arguments should match the number of channels in the output "
      "slice"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean=[1, 2, 3], std=[1, 2]),
     ["``mean`` and ``std`` must either be of the same size, be scalars, or one of them can be "
      "a vector and the other a scalar."]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], crop=(7, 9), pad_output=True,
                                                   out_of_bounds_policy="pad",
                                                   fill_values=[5, 6, 7]),
     ["The number of per-channel arguments should match"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mirror=n[1]),
     ['Unexpected type of argument "mirror". Expected int32 and got float']),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mirror=n[2]),
     ['Unexpected shape of argument "mirror". Expected batch of 2 scalars or a batch of '
      "tensors containing one element per sample. Got:\n{2,\n 2}"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean=n[3]),
     ["requested type: float current buffer type: double"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean=n[4]),
     ['Expected uniform shape for argument "mean" but got shape {3,\n 1}']),
    (lambda fn, types, n: fn.crop_mirror_normalize(fn.cast(n[0], dtype=types.INT8)),
     ["Not supported input type:int8"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], dtype=types.INT16),
     ["Not supported output type:int16"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], output_layout="HWX"),
     ["The requested output layout is not a permutation of input layout."]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], scale=n[1]),
     ["should not be a 'DataNode' but a 'float'."]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], out_of_bounds_policy="edge"),
     ["Not supported out_of_bounds_policy: edge"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean="a"),
     ["could not convert string to float: 'a'"]),
    (lambda fn, types, n: fn.crop_mirror_normalize(n[0], mirror=[1]),
     ["int() argument must be"]),
], ids=["mean count", "mean and std", "fill count", "mirror type", "mirror shape", "mean type",
        "mean shapes", "input type", "output type", "output layout", "scale node", "policy",
        "mean text", "mirror list"])
def test_crop_mirror_normalize_refusals_are_dalis(graph: object, words: list[str]) -> None:
    feeds = [IMAGES, [np.array([1.0], np.float32)] * 2, [np.array([1, 0], np.int32)] * 2,
             [np.array(MEAN)] * 2, [np.array(MEAN, np.float32), np.array([1], np.float32)]]
    assert_same(*run_both(graph, feeds, layouts=["HWC", "", "", "", ""]), words=words)


def test_where_dali_fails_crop_mirror_normalize_does_right() -> None:
    # docs/compat.md#cmn-empty-mean: DALI 2.4 dies (SIGFPE) on an empty mean.
    lite = run_graph("dali_lite", lambda fn, types, n: fn.crop_mirror_normalize(n[0], mean=[]),
                     [IMAGES], layouts=["HWC"])
    assert isinstance(lite.error, RuntimeError)
    assert "mean and standard deviation can't be empty" in str(lite.error)
    # docs/compat.md#cmn-fill-per-channel: per-channel fill values with one mean: DALI
    # normalizes the first channel only (the others read past its one-value mean: 0).
    lite = run_graph("dali_lite", lambda fn, types, n: fn.crop_mirror_normalize(
        n[0], crop=(2, 4), mean=4, std=2, out_of_bounds_policy="pad", fill_values=[5, 6, 7],
        output_layout="HWC"), [[np.full((2, 3, 3), 10, np.uint8)]], layouts=["HWC"])
    assert lite.outputs is not None
    (sample,), _, _ = lite.outputs[0]
    assert sample[0, 0].tolist() == [5, 6, 7] and (sample[:, 1:] == 3).all()


def test_five_dimensions_are_cut_where_dali_refuses() -> None:
    # docs/compat.md#slice-crop-five-dimensions: DALI 2.4 documents FDHWC for fn.crop but its
    # slice kernel stops at 4 dimensions.
    volumes = [np.arange(2 * 3 * 4 * 5 * 2, dtype=np.int16).reshape(2, 3, 4, 5, 2)]

    def graph(fn, types, n):
        return [fn.crop(n[0], crop=(2, 2, 3)), fn.slice(n[0], start=[1], end=[3], axes=[2])]

    dali, lite = run_both(graph, [volumes], layouts=["FDHWC"])
    assert dali.error is not None and "Not supported number of dimensions: 5" in str(dali.error)
    assert lite.outputs is not None
    (crop,), _, crop_layout = lite.outputs[0]
    (sliced,), _, _ = lite.outputs[1]
    np.testing.assert_array_equal(crop, volumes[0][:, 1:3, 1:3, 1:4])
    np.testing.assert_array_equal(sliced, volumes[0][:, :, 1:3])
    assert crop_layout == "FDHWC"
