"""The Python iteration protocols a source can have, and how DALI polls each, as a model.

An external_source's `source` that is not a callable is polled through `iter()` and `next()`.
What the user's object does with those two calls is its own business, and DALI's behaviour
over epochs follows from it, so the model replays both: the object (`SourceObject`), and the
way DALI 2.4 polls it.

The objects (`SourceSpec.kind`):

- ``iterable``: a re-iterable whose `__iter__` returns a fresh iterator (a list's) of `length`
  items each time; ``generator_function``: the same through a new generator per call;
- ``iterator``: an iterator that is its own `__iter__`, exhausted for good after `length`;
- ``restarting``: an iterator that is its own `__iter__`, raises StopIteration after
  `length` items and then starts over by itself, for `cap` items in its whole life (None: no
  end) (DALI's own test iterators, and many users', are written so).

An item's value says where it came from: `[-2, k]` for the k-th item of a pass of the first
three, `[-3, n]` for the n-th item of a restarting iterator's life. With `per_sample`, each
item is one sample (a `batch=False` iterable, serial only), so a pass may end inside a batch.

How DALI polls (`nvidia/dali/_utils/external_source_impl.py`, `_multiproc/worker.py`):

- serial (`SerialPoll`): `iter(source)` (of `source()` for a generator function) once, then
  `next()` on that same iterator at every poll, after every `reset()`, whatever it raised
  before; with `cycle`, `_CycleIter` calls `iter()` again at once after a StopIteration and
  lets it through ("raise") or takes the new iterator's first item ("quiet");
- parallel (`WorkerPoll`): the worker's `IterableSource` over its own copy of the object: once
  it raised StopIteration it raises again at every task, unless `cycle="raise"` and the task
  was scheduled after the source was reset (a newer `epoch_start`); "quiet" calls `iter()`
  again at once and takes the first item (if that raises too, it stays ended).
"""

from __future__ import annotations

from typing import Any

STOP = "stop"

Value = list[int]


class _Pass:
    """A list's iterator: `length` items `[-2, k]`, then StopIteration for good."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.position = 0

    def next(self) -> Value | str:
        if self.position >= self.length:
            return STOP
        self.position += 1
        return [-2, self.position - 1]


class _Restarting:
    """An iterator that starts over by itself after each StopIteration, `cap` items in all."""

    def __init__(self, length: int, cap: int | None) -> None:
        self.length, self.cap = length, cap
        self.in_pass = self.count = 0

    def next(self) -> Value | str:
        if self.cap is not None and self.count >= self.cap:
            return STOP
        if self.in_pass >= self.length:
            self.in_pass = 0
            return STOP
        self.in_pass += 1
        self.count += 1
        return [-3, self.count - 1]


class SourceObject:
    """The user's object as `iter()` sees it: `iter()` gives what `next()` is called on."""

    def __init__(self, kind: str, length: int, cap: int | None = None) -> None:
        self.kind, self.length = kind, length
        self._self: _Pass | _Restarting | None = None
        if kind == "iterator":
            self._self = _Pass(length)
        elif kind == "restarting":
            self._self = _Restarting(length, cap)

    def iter(self) -> Any:
        """`iter(source)` (or `source()`): a new pass, or the object itself."""
        return self._self if self._self is not None else _Pass(self.length)


class SerialPoll:
    """A serial source's iterator as DALI polls it (`_CycleIter` with `cycle`)."""

    def __init__(self, source: SourceObject, cycle: str | None) -> None:
        self.source, self.cycle = source, cycle
        self.iterator = source.iter()

    def next(self) -> Value | str:
        value = self.iterator.next()
        if value != STOP or self.cycle is None:
            return value  # type: ignore[no-any-return]
        self.iterator = self.source.iter()
        if self.cycle == "raise":
            return STOP
        return self.iterator.next()  # type: ignore[no-any-return]


class WorkerPoll:
    """DALI's worker-side `IterableSource` over the worker's copy of the object."""

    def __init__(self, source: SourceObject, cycle: str | None) -> None:
        self.source, self.cycle = source, cycle
        self._reset(0)

    def _reset(self, epoch_start: int) -> None:
        self.iterator = self.source.iter()
        self.raised = False
        self.epoch_start = epoch_start

    def __call__(self, task_epoch_start: int) -> Value | str:
        if self.raised:
            if self.cycle == "raise" and self.epoch_start < task_epoch_start:
                self._reset(task_epoch_start)
            else:
                return STOP
        value = self.iterator.next()
        if value != STOP:
            return value  # type: ignore[no-any-return]
        self.raised = True
        if self.cycle != "quiet":
            return STOP
        self.iterator = self.source.iter()
        value = self.iterator.next()
        if value != STOP:
            self.raised = False
        return value  # type: ignore[no-any-return]
