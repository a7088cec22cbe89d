"""The pipe protocol's messages survive pickling field for field, with both picklers."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import cloudpickle
from hypothesis import given
from hypothesis import strategies as st

from dali_lite_shm import SlotLayout
from dali_lite_workers.errors import RemoteError
from dali_lite_workers.messages import (
    AttachSegment,
    DataEnded,
    RunTask,
    Shutdown,
    TaskDone,
    TaskFailed,
    TaskStarted,
)

ids = st.integers(0, 2**62)
layouts = st.builds(SlotLayout, ids, ids, ids, ids, st.booleans())
args = st.one_of(
    st.lists(st.integers(), max_size=4).map(tuple),
    st.builds(range, ids, ids),  # a compact sequence, as SampleRange is for the pipeline
)
messages = st.one_of(
    st.builds(AttachSegment, ids),
    st.builds(RunTask, ids, ids, args, ids, st.booleans()),
    st.just(Shutdown()),
    st.builds(TaskStarted, ids, ids, st.floats(allow_nan=False)),
    st.builds(TaskDone, ids, ids, ids, layouts),
    st.builds(TaskFailed, ids, ids, ids, st.integers(-1, 100),
              st.builds(lambda text: RemoteError.from_exception(ValueError(text)), st.text())),
    st.builds(DataEnded, ids, ids, ids, st.integers(-1, 100),
              st.builds(lambda text: RemoteError.from_exception(StopIteration(text)), st.text())),
)


@given(message=messages, dumps=st.sampled_from([pickle.dumps, cloudpickle.dumps]))
def test_every_message_round_trips(message: Any, dumps: Any) -> None:
    back = pickle.loads(dumps(message))
    assert type(back) is type(message)
    for field in dataclasses.fields(message):
        assert getattr(back, field.name) == getattr(message, field.name), field.name
