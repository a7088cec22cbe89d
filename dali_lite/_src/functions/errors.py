"""How the Python-function operators report errors, the way DALI does.

DALI runs a user's function (python_function, dl_tensor_python_function, jax_function) inside
its C++ executor, so whatever the function raises reaches the caller of `run()` as a
`RuntimeError` whose message names the original type ("DLTensorPythonFunction error: KeyError:
'boom'"). A DALI program therefore catches `RuntimeError`. dali_lite keeps that promise and
also keeps the original type: the exception raised is an instance of a small class deriving
from both the user's exception class and `RuntimeError` (so `except KeyError` and `except
RuntimeError` both work), with the original exception, and its traceback, as `__cause__`.

Layout checks of the outputs live here too, since all three operators share DALI's wording.
"""

from __future__ import annotations

from typing import Any, cast

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError

# Exceptions whose type must not be mixed with RuntimeError: StopIteration would end the
# epoch if a twin of it escaped into the executor, and the others are not errors of the user's
# function but signals.
_NEVER_TWINNED = (StopIteration, StopAsyncIteration, GeneratorExit)
_TWINS: dict[type[BaseException], type[BaseException] | None] = {}


class FunctionError(RuntimeError):
    """An error of a user's function whose own type could not be kept (see `function_error`);
    the original exception is its `__cause__`."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


def _twin_str(self: BaseException) -> str:
    return str(getattr(self, "_dali_lite_message", BaseException.__str__(self)))


def _twin_reduce(self: BaseException) -> tuple[Any, ...]:
    # By reference to the original class: the twin itself is not importable by name.
    original = type(self).__mro__[1]
    return (_rebuild_twin, (original, self.args, getattr(self, "_dali_lite_message", None)))


def _rebuild_twin(cls: type[BaseException], args: tuple[Any, ...],
                  message: str | None) -> BaseException:
    twin = _runtime_twin(cls)
    error = (twin or cls)(*args)
    if message is not None:
        # An attribute of this one exception (its twin class's __str__ reads it).
        error._dali_lite_message = message  # type: ignore[attr-defined]
    return error


def _runtime_twin(cls: type[BaseException]) -> type[BaseException] | None:
    """A subclass of `cls` and RuntimeError (cached), or None where Python cannot make one."""
    if cls in _TWINS:
        return _TWINS[cls]
    twin: type[BaseException] | None = None
    if not issubclass(cls, _NEVER_TWINNED):
        try:
            twin = type(cls.__name__, (cls, RuntimeError),
                        {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                         "__str__": _twin_str, "__reduce__": _twin_reduce,
                         "__doc__": f"{cls.__name__}, raised by a pipeline's Python function "
                                    "(also a RuntimeError, as DALI reports it)."})
        except TypeError:  # a final class, or an instance layout RuntimeError cannot share
            twin = None
    _TWINS[cls] = twin
    return twin


def function_error(exc: Exception, where: str) -> Exception:
    """`exc`, raised by the user's function of operator `where`, as the caller should see it.

    The result is a RuntimeError (DALI's class) whose message carries the original type and
    message, and is still an instance of the original type where Python allows it. Raise it
    `from exc`. An exception that already is a RuntimeError is returned as it is.
    """
    if isinstance(exc, RuntimeError):
        return exc
    message = f"{where}: the function raised {type(exc).__name__}: {exc}"
    twin = _runtime_twin(type(exc))
    if twin is not None:
        try:
            error = twin(*exc.args)
        except Exception:  # an __init__ that does not take its own args back
            error = None
        if error is not None:
            error.__dict__.update(getattr(exc, "__dict__", {}))
            # An attribute of this one exception (its twin class's __str__ reads it).
            error._dali_lite_message = message  # type: ignore[attr-defined]
            return cast(Exception, error)
    return FunctionError(message)


def check_layout(layout: str, ndim: int, what: str) -> None:
    """Raise ValueError (DALI's class and words) when `layout` does not fit `ndim` dims."""
    if layout and len(layout) != ndim:
        raise ValueError(
            f"{what}: The layout '{layout}' is not valid for {ndim}-dimensional tensor (it "
            f"names {len(layout)} dimensions; the batch dimension has no letter)"
        )


def layout_list(output_layouts: Any, num_outputs: int, owner: str) -> list[str]:
    """`output_layouts` as one layout per output: a single string applies to all outputs, a
    shorter list leaves the remaining outputs without a layout (DALI's rule)."""
    if output_layouts is None:
        return [""] * num_outputs
    if isinstance(output_layouts, str):
        return [output_layouts] * num_outputs
    if not isinstance(output_layouts, (list, tuple)):
        raise RuntimeTypeError(
            f"{owner}: Invalid type of argument \"output_layouts\": expected a layout string "
            f"or a list of them; got {type(output_layouts).__name__} {output_layouts!r}"
        )
    layouts = list(output_layouts)
    for layout in layouts:
        if not isinstance(layout, str):
            raise RuntimeTypeError(
                f"{owner}: Invalid type of argument \"output_layouts\": every entry must be a "
                f"layout string; got {type(layout).__name__} {layout!r}"
            )
    if len(layouts) > num_outputs:
        raise RuntimeValueError(
            f"{owner}: The length of the output_layouts (={len(layouts)}) is greater than the "
            f"number of outputs (={num_outputs})"
        )
    return layouts + [""] * (num_outputs - len(layouts))
