"""What an external_source's `source` is: a callable of one argument or none, an iterable, a
generator or a generator function (`classify_source`, DALI's rules), and its `cycle` mode.

The kind decides which callable of `sources.callbacks` polls the source, whether a parallel
source may split its batches over workers, and how a checkpoint records its position.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["CYCLE_MODES", "SourceKind", "classify_source", "normalize_cycle"]


class SourceKind(enum.Enum):
    CALLABLE_NO_ARG = "callable with no argument"
    CALLABLE_ONE_ARG = "callable with one argument"
    ITERABLE = "iterable"
    GENERATOR_FUNCTION = "generator function"
    GENERATOR = "generator object"


CYCLE_MODES = {None: "no", False: "no", "no": "no", True: "quiet", "quiet": "quiet",
               "raise": "raise"}


def normalize_cycle(cycle: Any) -> str:
    """DALI's `cycle` values mapped to "no", "quiet" or "raise"."""
    try:
        return CYCLE_MODES[cycle]
    except (KeyError, TypeError):
        raise ValueError(
            f"Invalid value {cycle!r} for the argument `cycle`; valid values are 'no', False "
            "or None (no cycling), 'quiet' or True (rewind the data quietly) and 'raise' "
            "(raise StopIteration at each rewind)"
        ) from None


#: DALI's words for a `source` callable with a signature it cannot call.
_ARITY_RULE = ("The `source` callable must accept either 0 or 1 positional arguments to "
               "indicate whether it accepts the batch or sample indexing information.")


def _positional_arity(fn: Callable[..., Any], what: str) -> int:
    """Number of positional arguments `fn` takes (0 or 1); refuses every other signature.

    DALI's rule: no *args, **kwargs or keyword-only parameter (even with a default), and at
    most one parameter, defaults included; its words first, then which source and signature."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1  # builtins without signature metadata: assume the documented one argument
    found = None
    for param in signature.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            found = f"Found var-positional argument `*{param.name}` which is not allowed."
        elif param.kind is param.VAR_KEYWORD:
            found = f"Found var-keyword argument `**{param.name}` which is not allowed."
        elif param.kind is param.KEYWORD_ONLY:
            found = f"Found keyword-only argument `{param.name}` which is not allowed."
        if found is not None:
            break
    count = len(signature.parameters)
    if found is None and count > 1:
        found = "Found more than one positional argument, which is not allowed."
    if found is not None:
        raise TypeError(
            f"{_ARITY_RULE} {found} ({what} has the signature {signature}; external_source "
            "calls it with no argument or with one: the iteration, a BatchInfo or a SampleInfo. "
            "Bind other values with a closure or functools.partial)"
        )
    return count


def classify_source(source: Any, what: str = "source") -> SourceKind:
    """Which kind of source this is; raises TypeError for something that is none of them."""
    if inspect.isgenerator(source):
        return SourceKind.GENERATOR
    if inspect.isgeneratorfunction(source) or inspect.isgeneratorfunction(
        getattr(source, "__call__", None)  # noqa: B004 - a callable object's generator method
    ):
        return SourceKind.GENERATOR_FUNCTION
    if not inspect.isroutine(source) and hasattr(type(source), "__iter__"):
        # DALI tries iter() before calling: an object that is both iterable and callable is
        # used as an iterable.
        return SourceKind.ITERABLE
    if callable(source):
        arity = _positional_arity(source, what)
        return SourceKind.CALLABLE_ONE_ARG if arity == 1 else SourceKind.CALLABLE_NO_ARG
    try:
        iter(source)
    except TypeError:
        raise TypeError(
            f"{what} must be a callable, an iterable, a generator function or a generator; "
            f"got {type(source).__name__}"
        ) from None
    return SourceKind.ITERABLE


def check_parallel_source(kind: SourceKind | None, batch: bool, name: str) -> None:
    """Refuse a source that workers cannot run (DALI refuses these when the graph is defined,
    with a TypeError). DALI's words come first, then dali_lite's advice."""
    if kind is SourceKind.CALLABLE_NO_ARG:
        raise TypeError(
            "Callable passed to External Source in parallel mode (when `parallel=True`) must "
            "accept exactly one argument: `dali_lite.types.SampleInfo` if run with "
            "`batch=False` or either `dali_lite.types.BatchInfo` or integer that represents "
            "the index of the batch within the epoch if `batch=True`. Got a callable that does "
            f"not accept arguments instead. (parallel external_source {name!r}: workers could "
            "not tell which sample or batch to produce)"
        )
    if not batch and kind in (SourceKind.ITERABLE, SourceKind.GENERATOR_FUNCTION,
                              SourceKind.GENERATOR):
        # DALI sees a generator object as an iterable, and checks the batch mode first.
        what = "a generator function" if kind is SourceKind.GENERATOR_FUNCTION else "an iterable"
        raise TypeError(
            f"Parallel external source with {what} must be run in a batch mode (specify "
            "`batch=True` in the external source definition and make sure your source returns "
            f"batches) (parallel external_source {name!r}: one worker runs it in order, so it "
            "must produce whole batches)"
        )
    if kind is SourceKind.GENERATOR:
        raise TypeError(
            f"parallel external_source {name!r}: a generator object cannot be sent to a "
            "worker process; pass the generator function itself"
        )
