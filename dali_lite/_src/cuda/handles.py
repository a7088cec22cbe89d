"""The CUDA handles the GPU stages keep: events and streams, as protocols of what CuPy's objects
offer (CuPy has no type stubs, so without these they would be `Any` everywhere).

Only what dali_lite calls is declared. CuPy's `cupy.cuda.Event` and `cupy.cuda.Stream` (and
`ExternalStream`) satisfy them; so does anything else a test puts in their place.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["CudaEvent", "CudaStream"]


class CudaEvent(Protocol):
    """A CUDA event: recorded on a stream, done once the work before it is."""

    @property
    def ptr(self) -> int: ...

    @property
    def done(self) -> bool: ...

    def record(self, stream: CudaStream | None = None) -> None: ...

    def synchronize(self) -> None: ...


class CudaStream(Protocol):
    """A CUDA stream; entering it makes it CuPy's current stream."""

    @property
    def ptr(self) -> int: ...

    @property
    def priority(self) -> int: ...

    def synchronize(self) -> None: ...

    def wait_event(self, event: CudaEvent) -> None: ...

    def __enter__(self) -> CudaStream: ...

    def __exit__(self, *exc_info: object) -> None: ...
