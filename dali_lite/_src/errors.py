"""Error helpers shared by the pipeline and its operators.

Errors raised by user code (sources, python functions) reach the caller of `run()` with their
own type and message; dali_lite only adds a note saying where they happened.
"""

from __future__ import annotations


def add_context(exc: BaseException, note: str) -> None:
    """Attach `note` to `exc` (PEP 678 notes; shown under the traceback on Python >= 3.11)."""
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(note)
        return
    notes = getattr(exc, "__notes__", None)
    if notes is None:
        try:
            exc.__notes__ = notes = []  # type: ignore[attr-defined]
        except AttributeError:  # exceptions with __slots__ and no __dict__
            return
    notes.append(note)


def notes_of(exc: BaseException) -> list[str]:
    """The notes attached to `exc`, oldest first."""
    return list(getattr(exc, "__notes__", ()))


class RuntimeValueError(ValueError, RuntimeError):
    """A bad value where DALI raises `RuntimeError` (its C++ errors all surface as that):
    deriving from both keeps `except ValueError` and DALI users' `except RuntimeError`
    working."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class RuntimeTypeError(TypeError, RuntimeError):
    """A value of the wrong type where DALI raises `RuntimeError`; see RuntimeValueError."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class RuntimeIndexError(IndexError, RuntimeError):
    """An index out of range where DALI raises ``RuntimeError`` (``TensorListCPU.at``): both,
    so that ``except IndexError`` and DALI users' ``except RuntimeError`` work."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)
