"""serialize / deserialize_and_build / Pipeline.deserialize, and save_graph_to_dot_file."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from dali_lite import fn
from dali_lite.pipeline import Pipeline


def define(scale: int) -> Pipeline:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        data = fn.external_source(
            lambda i: np.full((2, 3), i, dtype=np.int32), layout="X", name="numbers"
        )
        scaled = fn.python_function(data, function=lambda x: x * scale)
        pipe.set_outputs(data, scaled)
    return pipe


def first_runs(pipe: Pipeline, runs: int = 2) -> list[list[list[int]]]:
    return [[out.as_array().tolist() for out in pipe.run()] for _ in range(runs)]


def test_round_trip_with_closures() -> None:
    original = define(scale=7)
    data = original.serialize()
    assert isinstance(data, bytes) and data.startswith(b"DALI_LITE_PIPELINE\n1\n")
    original.build()
    expected = first_runs(original)

    rebuilt = Pipeline(device_id=None)  # batch_size etc. come from the serialized pipeline
    rebuilt.deserialize_and_build(data)
    assert rebuilt.max_batch_size == 2
    assert first_runs(rebuilt) == expected
    assert rebuilt.run()[0].layout() == "X"

    other = Pipeline.deserialize(data, batch_size=2, prefetch_queue_depth=2)
    other.build()
    assert first_runs(other) == expected


def test_serialize_to_file(tmp_path: Path) -> None:
    target = tmp_path / "pipe.bin"
    data = define(scale=2).serialize(filename=str(target))
    assert target.read_bytes() == data
    pipe = Pipeline.deserialize(filename=target)
    pipe.build()
    assert first_runs(pipe, 1)[0][1] == [[0, 0, 0], [0, 0, 0]]


def test_unpicklable_callback_fails_at_run_with_reason() -> None:
    lock = threading.Lock()
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)

    def locked(i):  # holds the lock in its closure
        with lock:
            return np.zeros((1, 1))

    with pipe:
        pipe.set_outputs(fn.external_source(locked, name="locked"))
    rebuilt = Pipeline.deserialize(pipe.serialize())
    rebuilt.build()
    with pytest.raises(RuntimeError, match="could not be serialized"):
        rebuilt.run()


def test_bad_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="not a serialized dali_lite pipeline"):
        Pipeline.deserialize(b"\x08\x01garbage")
    with pytest.raises(ValueError, match="version"):
        Pipeline.deserialize(b"DALI_LITE_PIPELINE\n99\n")
    with pytest.raises(ValueError, match="mutually exclusive"):
        Pipeline.deserialize()


def test_push_mode_survives_serialization() -> None:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(name="fed"))
    rebuilt = Pipeline.deserialize(pipe.serialize())
    rebuilt.build()
    rebuilt.feed_input("fed", np.ones((2, 2)))
    assert rebuilt.run()[0].as_array().sum() == 4


@pytest.mark.parametrize("show_tensors", [False, True])
@pytest.mark.parametrize("show_ids", [False, True])
@pytest.mark.parametrize("use_colors", [False, True])
def test_dot_file(tmp_path: Path, show_tensors: bool, show_ids: bool, use_colors: bool) -> None:
    pipe = define(scale=3)
    target = tmp_path / "graph.dot"
    pipe.save_graph_to_dot_file(
        str(target), show_tensors=show_tensors, show_ids=show_ids, use_colors=use_colors
    )
    text = target.read_text()
    assert text.startswith("digraph") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    assert "ExternalSource" in text and "PythonFunction" in text
    assert ("shape=ellipse" in text) == show_tensors
    assert ("fillcolor" in text) == use_colors
    ids_in_labels = re.search(r'label="\d+_', text) is not None
    assert ids_in_labels == show_ids
    edges = re.findall(r"(\w+) -> (\w+);", text)
    assert edges, "the graph has edges"
    declared = set(re.findall(r"^\s+(\w+) \[", text, flags=re.M))
    assert all(a in declared and b in declared for a, b in edges)


def test_dot_file_is_valid_graphviz(tmp_path: Path) -> None:
    graphviz = shutil.which("dot")
    if graphviz is None:
        missing = ("Graphviz's dot is not installed (Debian: apt-get install graphviz; .ci/run "
                   "installs it)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {missing}")
        pytest.skip(missing)
    import subprocess

    target = tmp_path / "graph.dot"
    define(scale=3).save_graph_to_dot_file(str(target), show_tensors=True, show_ids=True,
                                           use_colors=True)
    subprocess.run([graphviz, "-Tsvg", str(target), "-o", str(tmp_path / "g.svg")], check=True)
