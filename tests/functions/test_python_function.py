"""fn.python_function and fn.dl_tensor_python_function on the CPU."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from dali_lite import fn
from dali_lite.pipeline import Pipeline


def run_graph(graph, batch_size: int = 3, runs: int = 1):
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        outputs = graph()
        outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        pipe.set_outputs(*outputs)
    pipe.build()
    results = [pipe.run() for _ in range(runs)]
    return pipe, results


def source():
    return fn.external_source(lambda i: np.arange(6, dtype=np.float32).reshape(3, 2) + i)


def test_per_sample_function() -> None:
    _, [(x, y)] = run_graph(
        lambda: (lambda s: [s, fn.python_function(s, function=np.negative)])(source())
    )
    np.testing.assert_array_equal(y.as_array(), -x.as_array())


def test_several_inputs_and_outputs() -> None:
    def graph():
        a, b = source(), source()
        total, diff = fn.python_function(
            a, b, function=lambda p, q: (p + q, p - q), num_outputs=2, output_layouts=["X"]
        )
        return [total, diff]

    _, [(total, diff)] = run_graph(graph)
    np.testing.assert_array_equal(total.as_array(), 2 * np.arange(6).reshape(3, 2))
    assert not diff.as_array().any()
    assert total.layout() == "X" and diff.layout() == ""


def test_output_layouts_single_string_applies_to_all() -> None:
    def graph():
        s = source()
        return fn.python_function(s, function=lambda p: (p, p), num_outputs=2, output_layouts="X")

    _, [(a, b)] = run_graph(graph)
    assert a.layout() == "X" and b.layout() == "X"


def test_batch_processing_gets_lists() -> None:
    seen = []

    def function(batch):
        seen.append((type(batch), len(batch)))
        return [sample * 10 for sample in batch]

    _, [(x, y)] = run_graph(
        lambda: (lambda s: [s, fn.python_function(s, function=function, batch_processing=True)])(
            source()
        )
    )
    assert seen == [(list, 3)]
    np.testing.assert_array_equal(y.as_array(), x.as_array() * 10)


def test_batch_processing_must_return_a_list_of_samples() -> None:
    # DALI 2.4 refuses one dense array as a batch (compat case
    # functions.python_function_batch_output_must_be_a_list).
    with pytest.raises(RuntimeError, match="must be a list of samples"):
        run_graph(
            lambda: fn.python_function(
                source(), function=lambda batch: np.stack(batch) + 1, batch_processing=True
            )
        )


def test_zero_outputs_still_runs_as_a_sink() -> None:
    calls = []

    def graph():
        s = source()
        assert (
            fn.python_function(
                s, function=lambda x: calls.append(x.sum()), num_outputs=0, preserve=True
            )
            is None
        )
        return s

    run_graph(graph, runs=2)
    assert len(calls) == 6


@pytest.mark.parametrize(
    ("function", "num_outputs", "error", "words"),
    [
        # DALI's rules and classes (compat cases functions.python_function_output_count_*).
        (lambda x: (x, x, x), 2, ValueError, "got 3, expected 2"),
        (lambda x: x, 2, TypeError, "must be a tuple"),
        (lambda x: None, 1, TypeError, "returned 0 outputs"),
        (lambda x: "text", 1, TypeError, "numpy.ndarray"),
    ],
)
def test_wrong_results_are_explained(function, num_outputs, error, words) -> None:
    with pytest.raises(error, match=words) as caught:
        run_graph(lambda: fn.python_function(source(), function=function, num_outputs=num_outputs))
    assert isinstance(caught.value, RuntimeError)  # what DALI raises


def test_wrong_batch_result_length() -> None:
    with pytest.raises(ValueError, match="wrong size: 1 samples, but the batch has 3"):
        run_graph(
            lambda: fn.python_function(source(), function=lambda b: b[:1], batch_processing=True)
        )


def test_exception_reaches_caller_with_type_message_and_note() -> None:
    class Boom(Exception):
        pass

    def function(x):
        raise Boom("inside")

    with pytest.raises(Boom, match="inside") as info:
        run_graph(lambda: fn.python_function(source(), function=function, name="exploder"))
    assert any(
        "exploder" in note and "sample 0" in note for note in getattr(info.value, "__notes__", [])
    )
    # DALI reports it as a RuntimeError (compat case
    # functions.python_function_exception_is_a_runtime_error): it is one, and still a Boom,
    # with the original exception as its cause.
    assert isinstance(info.value, RuntimeError)
    assert "Boom: inside" in str(info.value)
    assert type(info.value.__cause__) is Boom


def test_exception_of_the_function_survives_pickling() -> None:
    def function(x):
        raise KeyError("boom")

    with pytest.raises(KeyError) as info:
        run_graph(lambda: fn.python_function(source(), function=function))
    again = pickle.loads(pickle.dumps(info.value))
    assert isinstance(again, KeyError) and isinstance(again, RuntimeError)
    assert str(again) == str(info.value)


def test_stop_iteration_in_the_function_does_not_end_the_epoch() -> None:
    def function(x):
        raise StopIteration

    with pytest.raises(RuntimeError, match="StopIteration") as info:
        run_graph(lambda: fn.python_function(source(), function=function))
    assert not isinstance(info.value, StopIteration)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="function"):
        fn.python_function(function=42)
    with pytest.raises(TypeError, match="missing 1 required argument: 'function'"):
        fn.python_function()
    with pytest.raises(ValueError, match="num_outputs"):
        fn.python_function(function=abs, num_outputs=-1)
    # A NumPy array is a constant input, as in DALI; an object that is no constant is refused.
    with pytest.raises(TypeError, match="DataNode"):
        fn.python_function(object(), function=abs)


def test_dl_tensor_function_passes_capsules() -> None:
    kinds = []

    def function(capsule):
        kinds.append(type(capsule).__name__)
        array = np.from_dlpack(_Holder(capsule))
        return (array * 2).__dlpack__()

    _, [(x, y)] = run_graph(
        lambda: (lambda s: [s, fn.dl_tensor_python_function(s, function=function,
                                                             batch_processing=False)])(source())
    )
    assert set(kinds) == {"PyCapsule"}
    np.testing.assert_array_equal(y.as_array(), x.as_array() * 2)


def test_dl_tensor_function_runs_per_batch_by_default() -> None:
    # DALI 2.4's code defaults batch_processing=True (compat case
    # functions.dl_tensor_default_is_per_batch).
    def function(capsules):
        return [(np.from_dlpack(_Holder(c)) + 1).__dlpack__() for c in capsules]

    _, [(x, y)] = run_graph(
        lambda: (lambda s: [s, fn.dl_tensor_python_function(s, function=function)])(source())
    )
    np.testing.assert_array_equal(y.as_array(), x.as_array() + 1)


def test_dl_tensor_function_refuses_arrays_as_results() -> None:
    def function(capsules):
        return [np.from_dlpack(_Holder(c)) for c in capsules]

    with pytest.raises(TypeError, match="should return DLPack tensors") as caught:
        run_graph(lambda: fn.dl_tensor_python_function(source(), function=function))
    assert isinstance(caught.value, RuntimeError)


class _Holder:
    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, *args, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)
