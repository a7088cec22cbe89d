"""Pinned slots: `.gpu()` copies a batch straight from the shared-memory slot a worker wrote.

Without this, `.gpu()` stages every batch through a pinned buffer (`transfer.StagingRing`): one
host copy, then the DMA. A dense batch of a parallel source already lies in one block of one
slot, a mapping of a shared-memory file that the main process keeps for the pipeline's life.
`PinnedSlots` registers such a mapping with CUDA once (`cudaHostRegister`, which pins its
pages), so that the block is copied to the device directly, on the pipeline's stream.

Lifetimes:

* The slot must not be reused while the DMA reads it: the block (a view holding the slot's
  lease) is kept here until the copy's event has completed (`hold`); the slot goes back to
  its free list only after that.
* A registration lives as long as the mapping: it is keyed by the mapping object (an mmap,
  weakly referenced), never by its address, so a new mapping at an old address is never
  taken for a registered one; when the mmap object goes away the registration is dropped
  (`cudaHostUnregister`). A registration that CUDA refuses (no support, the address still
  registered by a mapping that was unmapped but not yet collected) sends that batch through
  the staging ring instead.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.cuda.handles import CudaEvent
from dali_lite_shm import leased_mapping

__all__ = ["PinnedSlots"]


class PinnedSlots:
    """Registrations of slot mappings with CUDA, and the blocks their copies still read."""

    def __init__(self, gpu: cuda_context.GPUContext) -> None:
        self.gpu = gpu
        self._lock = threading.Lock()
        #: id(mmap) -> (weak reference to it, address): the mappings registered now.
        self._registered: dict[int, tuple[weakref.ref[Any], int]] = {}
        self._in_flight: deque[tuple[CudaEvent, np.ndarray]] = deque()
        self.refusals = 0  # registrations CUDA refused (those batches were staged)

    @property
    def registered(self) -> int:
        with self._lock:
            return len(self._registered)

    def address_of(self, block: np.ndarray) -> int | None:
        """The host address to copy `block` from, if it is a C-contiguous view into a
        shared-memory slot whose mapping is (now) registered; None otherwise."""
        if not block.flags.c_contiguous or not block.nbytes:
            return None
        found = leased_mapping(block)
        if found is None:
            return None
        mapping, address, size = found
        key = id(mapping)
        with self._lock:
            entry = self._registered.get(key)
            if entry is not None and entry[0]() is mapping:
                return int(block.ctypes.data)
        cp = cuda.cupy()
        try:
            with self.gpu.device:
                cp.cuda.runtime.hostRegister(address, size, 0)
        except cp.cuda.runtime.CUDARuntimeError:
            self.refusals += 1
            return None
        def forget(_ref: object, k: int = key, a: int = address) -> None:
            self._forget(k, a)

        reference = weakref.ref(mapping, forget)
        with self._lock:
            self._registered[key] = (reference, address)
        return int(block.ctypes.data)

    def hold(self, block: np.ndarray, event: CudaEvent) -> None:
        """Keep `block` (and so its slot's lease) until `event`, the copy that reads it, is
        complete; let go of the blocks whose copies are done."""
        with self._lock:
            self._in_flight.append((event, block))
            while self._in_flight and self._in_flight[0][0].done:
                self._in_flight.popleft()

    def _forget(self, key: int, address: int) -> None:
        # The mmap object is gone (any thread, from the garbage collector): its copies were
        # all waited for (the blocks held it alive until then).
        with self._lock:
            entry = self._registered.pop(key, None)
        if entry is not None:
            self._unregister(address)

    def _unregister(self, address: int) -> None:
        cp = cuda.cupy()
        with contextlib.suppress(cp.cuda.runtime.CUDARuntimeError), self.gpu.device:
            cp.cuda.runtime.hostUnregister(address)

    def close(self) -> None:
        """Wait for the copies still reading slots, then drop every registration."""
        with self._lock:
            in_flight, self._in_flight = self._in_flight, deque()
            registered, self._registered = self._registered, {}
        for event, _block in in_flight:
            event.synchronize()
        in_flight.clear()
        for _reference, address in registered.values():
            self._unregister(address)
