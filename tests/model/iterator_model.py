"""A model of DALI's framework iterators over the pipeline model: what `next()`, `reset()` and
`iter()` of a `DALIGenericIterator` give, epoch after epoch.

It replays NVIDIA DALI 2.4's `_DaliBaseIterator` (`nvidia/dali/plugin/base_iterator.py`) and
the PyTorch `DALIGenericIterator.__next__` for one pipeline without `reader_name`: the
counter of samples against `size` (-1: until the pipeline raises StopIteration, which forces
`last_batch_policy=FILL` and `last_batch_padded=False`), `auto_reset`, the three
`last_batch_policy` values (FILL returns whole batches and carries the overshoot into the next
epoch unless `last_batch_padded`; DROP ends before a batch that would cross `size`, and its
`reset()` takes that batch first; PARTIAL cuts the last batch to `size`), `reset()` before the
end (ignored, with a warning), `iter()` (a reset once something was consumed) and
`prepare_first_batch` (the first batch taken when the iterator is made; a pipeline with no
data then raises DALI's RuntimeError, observed as `NO_DATA`).

dali_lite differs on purpose in one place (docs/compat.md, `iterator-reset-mid-epoch`): a
`reset()` of a `size=-1` iterator before the pipeline raised its StopIteration is ignored
(DALI resets, and loses the rest of the epoch, when its prefetching already met the end);
`engine="dali_lite"` predicts that.

The pipeline under it is `epoch_model.ModelPipeline`, driven through the scheduled API as
DALI's iterator drives it (`schedule_run()` once before the first `share_outputs()`, then
after every batch; `reset()` schedules again when the pipeline is `empty()`).
"""

from __future__ import annotations

from epoch_model import STOP, Batch, ModelPipeline, Observation, Program

#: What making the iterator observes when `prepare_first_batch` finds no data.
NO_DATA = "error: no data in the pipeline"
#: The steps of an iterator program: `next(it)`, `it.reset()`, `iter(it)`.
ITERATOR_STEPS = ("next", "reset", "iter")


class _Stop(Exception):
    """StopIteration inside the model (raised by `next()`, and by `reset()` under DROP)."""


class ModelIterator:
    """DALI's `DALIGenericIterator(pipe, output_map, size, auto_reset, last_batch_policy,
    last_batch_padded, prepare_first_batch)` over one pipeline."""

    def __init__(self, program: Program, engine: str = "dali") -> None:
        spec = program.iterator
        self.engine = engine
        #: dali_lite's: the pipeline raised StopIteration in this epoch.
        self.pipeline_ended = False
        assert spec is not None
        self.pipe = ModelPipeline(program)
        self.batch_size = program.batch_size
        self.size = spec.size
        self.auto_reset = spec.auto_reset
        self.policy, self.padded = spec.policy, spec.padded
        if self.size < 0:
            self.policy, self.padded = "FILL", False
        self.prepare_first_batch = spec.prepare_first_batch
        self.counter = 0
        self.ever_scheduled = False
        self.ever_consumed = False
        self.first_batch: list[Batch] | None = None

    def start(self) -> Observation:
        """What making the iterator observes: None, or NO_DATA."""
        if self.prepare_first_batch:
            try:
                self.first_batch = self._next()
            except _Stop:
                return NO_DATA  # _report_no_data_in_pipeline (the pipeline is not restored)
            self.ever_consumed = False
        return None

    def step(self, step: str) -> Observation:
        try:
            if step == "next":
                return self._next()
            if step == "reset":
                self.reset()
            else:
                self.iter()
        except _Stop:
            return STOP
        return None

    # ------------------------------------------------------------------ DALI's methods
    def _get_outputs(self) -> list[Batch]:
        if not self.ever_scheduled:
            self._schedule_runs()
        if self.size > 0 and self.counter >= self.size:
            self._end_iteration()
        outputs = self.pipe.outputs()
        if outputs == STOP:
            self.pipeline_ended = True
            if self.size < 0 and self.auto_reset:
                self.reset()
            raise _Stop
        return outputs  # type: ignore[return-value]

    def _end_iteration(self) -> None:
        if self.auto_reset:
            self.reset()
        raise _Stop

    def _schedule_runs(self) -> None:
        self.ever_scheduled = True
        self.pipe.schedule_run()

    def _advance_and_check_drop_last(self, dry_run: bool = False,
                                     end_iteration: bool = True) -> bool:
        counter = self.counter + self.batch_size
        should_end = self.policy == "DROP" and counter > self.size
        if not dry_run:
            self.counter = counter
            if should_end and end_iteration:
                self._end_iteration()
        return should_end

    def _next(self) -> list[Batch]:
        self.ever_consumed = True
        if self.first_batch is not None:
            batch, self.first_batch = self.first_batch, None
            return batch
        outputs = self._get_outputs()
        self._schedule_runs()
        self._advance_and_check_drop_last()
        if self.policy == "PARTIAL" and self.counter > self.size > 0:
            wanted = self.batch_size - (self.counter - self.size)
            keep = wanted % self.batch_size or self.batch_size
            return [batch[:keep] for batch in outputs]
        return outputs

    def reset(self) -> None:
        if self.policy == "DROP":
            should_end = self._advance_and_check_drop_last(dry_run=True, end_iteration=False)
            already_ended = self.size > 0 and self.counter >= self.size
            if should_end and not already_ended:
                self._get_outputs()
                self._schedule_runs()
                self._advance_and_check_drop_last(end_iteration=False)
        if self.size > 0 or self.engine == "dali":
            epoch_over = self.counter >= self.size or self.size < 0
        else:
            epoch_over = self.pipeline_ended
        if epoch_over:
            self.pipeline_ended = False
            if self.policy == "FILL" and not self.padded:
                self.counter = self.counter % self.size
            else:
                self.counter = 0
            self.pipe.reset()
            if not self.pipe.outputs_queue:  # DALI's `empty()`
                self.pipe.schedule_run()
        # else: DALI warns that it ignores a reset() before the end of the epoch

    def iter(self) -> None:
        if self.counter != 0 and self.ever_consumed:
            self.reset()


def expected_iterator(program: Program, engine: str = "dali") -> list[Observation]:
    """What making the iterator and each step of `program` observe on `engine`."""
    model = ModelIterator(program, engine)
    first = model.start()
    if first == NO_DATA:
        return [NO_DATA]
    return [first, *(model.step(step) for step in program.steps)]
