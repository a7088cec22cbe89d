"""A framework iterator's position inside its pipelines' checkpoints, as DALI's iterators keep it.

DALI's iterators store their position (`_counter`, `_size`) as a JSON string, the
`iterator_data` of every pipeline's checkpoint (`_get_checkpoint(iterator_data)`), and take it
back from the `_iterator_data` of pipelines restored from one (as DALI: warnings, not errors,
when the pipelines disagree). This module owns that string and `checkpoints()`, as a base
class of `base_iterator._DaliBaseIterator`, whose epoch logic moves the position
(docs/checkpointing.md, "For framework iterators").
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["IteratorCheckpoints"]

# One logger for all that an iterator warns about: the base iterator's.
_logger = logging.getLogger("dali_lite._src.frameworks.base_iterator")


class IteratorCheckpoints:
    """`checkpoints()` and the iterator's position in them, for `_DaliBaseIterator`."""

    # Set by the iterator before `_init_checkpointing` runs.
    _pipes: list[Any]
    _counter: int
    _size: int
    _ever_consumed: bool

    def _init_checkpointing(self) -> None:
        """Take the iterator's position from the checkpoint its pipelines were restored from
        (as DALI: warnings, not errors, when they disagree), and keep the checkpoints of the
        start, taken before `prepare_first_batch` runs a pipeline."""
        self._enable_checkpointing = bool(self._pipes[0]._enable_checkpointing)
        if any(bool(p._enable_checkpointing) != self._enable_checkpointing
               for p in self._pipes):
            raise ValueError(
                "All wrapped pipelines must have the same value for `enable_checkpointing`.")
        if not self._enable_checkpointing:
            return
        restored = [p.is_restored_from_checkpoint for p in self._pipes]
        if any(restored):
            data = [p._iterator_data for p in self._pipes]
            if not all(restored):
                _logger.warning("Some, but not all of the pipelines used were restored from "
                                "checkpoint. This iterator might produce unexpected results.")
            elif any(d != data[0] for d in data):
                _logger.warning("The provided pipelines had different iterator data in the "
                                "checkpoints they were restored from. This iterator might "
                                "produce unexpected results.")
            self._restore_state(data[0])
        state = self._save_state()
        self._initial_checkpoints = [p._get_checkpoint(iterator_data=state) for p in self._pipes]

    def _save_state(self) -> str:
        """The iterator's position (DALI's field names; dali_lite has no shards)."""
        return json.dumps({"_counter": int(self._counter), "_size": int(self._size)})

    def _restore_state(self, iterator_data: str | None) -> None:
        if not iterator_data:
            _logger.warning("Iterator data was not saved in the checkpoint. This iterator "
                            "might produce unexpected results.")
            return
        try:
            state = json.loads(iterator_data)
        except json.JSONDecodeError:
            raise ValueError(
                "Iterator checkpoint data is not a valid JSON string. Please make sure that "
                "the checkpoint was created with the same version of DALI.") from None
        if not isinstance(state, dict):
            raise ValueError(f"iterator checkpoint data must be a JSON object; got {state!r}")
        for field in ("_counter", "_size"):
            value = state.get(field)
            if value is not None:
                if type(value) is not int:
                    raise ValueError(f"iterator checkpoint data: {field} must be an integer; "
                                     f"got {value!r}")
                setattr(self, field, value)

    def checkpoints(self) -> list[bytes]:
        """Returns the current checkpoints of the pipelines.

        One per pipeline, each with the iterator's position: a pipeline created with
        `checkpoint=` one of them, wrapped in a new iterator, goes on with the batch this
        iterator would give next (the end of an epoch included: see docs/checkpointing.md).
        """
        if not self._enable_checkpointing:
            raise ValueError("Cannot access checkpoints with checkpointing disabled")
        if not self._ever_consumed:
            return list(self._initial_checkpoints)
        state = self._save_state()
        return [p._get_checkpoint(iterator_data=state) for p in self._pipes]
