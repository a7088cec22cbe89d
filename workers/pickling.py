"""How callbacks travel to ``spawn`` workers.

This module owns the "callback pickler" knob (DALI's ``py_callback_pickler``). A fresh
``spawn`` interpreter shares no memory with the main process, so each callback is serialised
in the main process and deserialised in the worker. The user may pass:

* ``None``: cloudpickle, so lambdas, closures and local functions work;
* a module with ``dumps``/``loads`` (``pickle``, ``dill``, ...): sent to the worker by
  module *name* and imported there;
* an object with ``dumps``/``loads``: sent to the worker with the standard pickle;
* a tuple ``(pickler, dumps_kwargs, loads_kwargs)`` of one of the above and keyword
  arguments for its two functions.

Each callback is pickled separately, so a failure names the callback's index.

cloudpickle pickles a function of the main module (which a spawned worker cannot import under
its name) by value, code object and all, and since 3.1 writes ``"<dynamic-code>"`` as each code
object's file name. A callback that raises in a worker would then show ``File
"<dynamic-code>"`` and no source line, where a forked worker shows the user's file, line and
source. With cloudpickle (the default), callbacks are pickled by :func:`_dumps_keeping_files`,
cloudpickle's own pickler with that one change undone: the worker's traceback names the file
and line (and shows the line, where the worker can read the file), as under fork.
"""

from __future__ import annotations

import functools
import importlib
import io
import pickle
import types
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dali_lite_workers.callbacks import Callback, LoadedCallback
from dali_lite_workers.errors import CallbackPicklingError, RemoteError
from dali_lite_workers.start_methods import StartMethod

__all__ = [
    "Pickler",
    "PicklerSpec",
    "dump_callbacks",
    "load_callbacks",
    "prepare_callbacks",
    "resolve_pickler",
]


class Pickler(Protocol):
    """A callback pickler: a module (``pickle``, ``cloudpickle``, ``dill``) or an object with
    ``dumps`` and ``loads``, each called with the keyword arguments the user gave for it."""

    # Untyped: what is pickled is a callback, what is unpickled whatever was pickled, and the
    # extra arguments are the pickler's own; ``dumps`` may return anything (checked here).
    def dumps(self, obj: Any, /, *args: Any, **kwargs: Any) -> object: ...

    def loads(self, data: bytes, /, *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class PicklerSpec:
    """A picklable description of a callback pickler."""

    module_name: str | None = None
    obj: Pickler | None = None
    #: The keyword arguments of ``dumps`` and ``loads``: the pickler's own, passed through.
    dumps_kwargs: Mapping[str, Any] = field(default_factory=dict)
    loads_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def _pickler(self) -> Pickler:
        if self.module_name is not None:
            return importlib.import_module(self.module_name)
        assert self.obj is not None  # resolve_pickler gives a module name or an object
        return self.obj

    @property
    def name(self) -> str:
        """How to call this pickler in an error message."""
        if self.module_name is not None:
            return f"module {self.module_name!r}"
        return f"pickler object {self.obj!r}"

    def dumps(self, obj: object) -> bytes:
        """Serialise ``obj`` with the pickler (in the main process)."""
        dumps: Callable[..., object] = self._pickler().dumps
        if self.module_name == "cloudpickle":
            dumps = _dumps_keeping_files  # the user's file names in tracebacks, as under fork
        data = dumps(obj, **dict(self.dumps_kwargs))
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"{self.name}.dumps returned {type(data).__name__}, not bytes")
        return bytes(data)

    def loads(self, data: bytes) -> Any:  # whatever was pickled (a callback)
        """Deserialise ``data`` with the pickler (in the worker)."""
        return self._pickler().loads(data, **dict(self.loads_kwargs))


#: The file name cloudpickle gives every code object it pickles by value.
_DYNAMIC_FILE_NAME = "<dynamic-code>"


@functools.cache
def _file_keeping_pickler() -> type[pickle.Pickler]:
    """cloudpickle's pickler, whose code objects keep their ``co_filename`` (built on first
    use: cloudpickle is imported only where a callback is pickled with it)."""
    import cloudpickle

    base: Any = cloudpickle.Pickler  # untyped (no stubs), as its dispatch table is
    table: MutableMapping[type, Callable[[Any], Any]] = base.dispatch_table
    reduce_code = table[types.CodeType]

    def reduce_keeping_file(code: types.CodeType) -> tuple[object, tuple[object, ...]]:
        rebuild, args = reduce_code(code)  # (types.CodeType, its constructor's arguments)
        # The file name is one of the constructor's arguments, at a place that varies with
        # the Python version: the one that equals the placeholder. Nothing else does; should
        # cloudpickle stop writing it, no argument matches and the code is pickled as before.
        return rebuild, tuple(code.co_filename
                              if isinstance(arg, str) and arg == _DYNAMIC_FILE_NAME else arg
                              for arg in args)

    own: dict[type, Callable[[Any], Any]] = {types.CodeType: reduce_keeping_file}

    class FileKeepingPickler(base):  # type: ignore[misc]  # cloudpickle: untyped
        dispatch_table = ChainMap(own, table)

    return FileKeepingPickler


def _dumps_keeping_files(obj: object, protocol: int | None = None,
                         buffer_callback: Callable[[pickle.PickleBuffer], object] | None = None
                         ) -> bytes:
    """``cloudpickle.dumps`` (same arguments, same loads), keeping code objects' file names."""
    with io.BytesIO() as file:
        _file_keeping_pickler()(file, protocol=protocol, buffer_callback=buffer_callback
                                ).dump(obj)
        return file.getvalue()


def _check_has_dumps_loads(pickler: object) -> None:
    for attr in ("dumps", "loads"):
        if not callable(getattr(pickler, attr, None)):
            raise TypeError(
                f"the callback pickler {pickler!r} has no callable {attr!r}; pass a module or "
                "object with dumps() and loads() (e.g. pickle, cloudpickle, dill), or a tuple "
                "(pickler, dumps_kwargs, loads_kwargs)"
            )


def resolve_pickler(pickler: Any | None) -> PicklerSpec:
    """Turn the user's ``pickler`` argument into a :class:`PicklerSpec` (None: cloudpickle).

    ``pickler`` is untyped: DALI's ``py_callback_pickler`` as the user gave it (a `Pickler`, a
    tuple of one and its keyword arguments, or anything else, refused here)."""
    dumps_kwargs: Mapping[str, Any] = {}
    loads_kwargs: Mapping[str, Any] = {}
    if isinstance(pickler, tuple):
        if len(pickler) != 3:
            raise TypeError(
                "a callback pickler tuple must be (pickler, dumps_kwargs, loads_kwargs), got "
                f"{len(pickler)} items"
            )
        pickler, dumps_kwargs, loads_kwargs = pickler
        dumps_kwargs = dict(dumps_kwargs or {})
        loads_kwargs = dict(loads_kwargs or {})
    if pickler is None:
        return PicklerSpec("cloudpickle", None, dumps_kwargs, loads_kwargs)
    _check_has_dumps_loads(pickler)
    if isinstance(pickler, types.ModuleType):
        return PicklerSpec(pickler.__name__, None, dumps_kwargs, loads_kwargs)
    return PicklerSpec(None, pickler, dumps_kwargs, loads_kwargs)


def dump_callbacks(callbacks: Sequence[Callback], spec: PicklerSpec) -> list[bytes]:
    """Pickle each callback, raising :class:`CallbackPicklingError` naming the culprit."""
    payloads: list[bytes] = []
    for index, callback in enumerate(callbacks):
        try:
            payloads.append(spec.dumps(callback))
        except Exception as exc:
            raise CallbackPicklingError(
                f"callback {index} ({callback!r}) cannot be pickled with {spec.name} to send it "
                f"to 'spawn' worker processes: {type(exc).__name__}: {exc}. Make it picklable "
                "(define it at module level, avoid capturing locks, open files or sockets), "
                "pass a different py_callback_pickler, or use the 'fork' start method."
            ) from exc
    return payloads


def load_callbacks(payloads: Sequence[bytes],
                   spec: PicklerSpec) -> list[LoadedCallback | RemoteError]:
    """Unpickle each callback where it runs (a spawned worker, a Ray actor); one that fails
    becomes its error, reported with every task that uses it instead of ending the worker."""
    loaded: list[LoadedCallback | RemoteError] = []
    for payload in payloads:
        try:
            loaded.append(LoadedCallback.of(spec.loads(payload)))
        except BaseException as exc:
            loaded.append(RemoteError.from_exception(exc))
    return loaded


def prepare_callbacks(
    callbacks: Sequence[Callback], start_method: StartMethod, pickler: Any | None
) -> tuple[tuple[bytes, ...] | None, PicklerSpec | None]:
    """What a worker needs to get ``callbacks``: nothing where it starts as a copy of this
    process (fork), payloads where it does not (spawn, Ray).

    Raises ``ValueError`` for a pickler with ``fork``, ``TypeError`` for a pickler that the
    standard pickle cannot send, and :class:`CallbackPicklingError` for a callback.
    """
    if start_method.copies_parent:
        if pickler is not None:
            raise ValueError(
                "a callback pickler is only used with the 'spawn' start method; with "
                f"{start_method.name!r} the callbacks are inherited. Drop the pickler or use "
                "'spawn'."
            )
        return None, None
    spec = resolve_pickler(pickler)
    try:
        pickle.dumps(spec)
    except Exception as exc:
        raise TypeError(
            f"the callback pickler {spec.name} must itself be picklable with the standard "
            f"pickle to reach 'spawn' workers: {exc}; pass a module instead"
        ) from exc
    return tuple(dump_callbacks(callbacks, spec)), spec
