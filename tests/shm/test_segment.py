"""SharedSegment: creation, growth, refresh across processes, leases, limits, teardown."""

from __future__ import annotations

import errno
import gc
import os
import pickle
import stat
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from leaks import run_in_session

import dali_lite_shm.budget as budget
import dali_lite_shm.mapping as mapping_module
import dali_lite_shm.segment as segment_module
from dali_lite_shm import (
    SHM_LIMIT_ENV,
    LeaseEnds,
    SharedSegment,
    ShmAllocationError,
    ShmError,
    shm_bytes_in_use,
)


@pytest.fixture
def segment() -> Iterator[SharedSegment]:
    seg = SharedSegment.create(4096, name="test")
    yield seg
    seg.close()


def test_create_is_anonymous_memfd(segment: SharedSegment) -> None:
    assert segment.capacity == 4096
    assert not segment.closed
    target = os.readlink(f"/proc/self/fd/{segment.fd}")
    assert target.startswith("/memfd:test")
    assert os.fstat(segment.fd).st_size == 4096
    assert os.get_inheritable(segment.fd) is False


def test_create_zero_capacity_maps_nothing() -> None:
    seg = SharedSegment.create(0)
    try:
        assert seg.capacity == 0
        assert seg.array().size == 0
        lease = seg.lease(0)
        assert lease.size == 0 and lease.dtype == np.uint8
    finally:
        seg.close()


def test_create_rejects_negative_capacity() -> None:
    with pytest.raises(ValueError, match="capacity"):
        SharedSegment.create(-1)


def test_fallback_without_memfd_is_private_and_unlinked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "memfd_create")
    seg = SharedSegment.create(8192)
    try:
        info = os.fstat(seg.fd)
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert info.st_nlink == 0  # unlinked: nothing named is left anywhere
        seg.array()[:4] = [1, 2, 3, 4]
        assert bytes(seg.array(0, 4)) == b"\x01\x02\x03\x04"
    finally:
        seg.close()


def test_grow_preserves_data_keeps_old_views_and_never_shrinks(segment: SharedSegment) -> None:
    old_view = segment.array(0, 16)
    old_view[:] = np.arange(16, dtype=np.uint8)
    segment.grow(3 * 4096)
    assert segment.capacity == 3 * 4096
    assert os.fstat(segment.fd).st_size == 3 * 4096
    # The view into the previous mapping is still valid and shares the same pages.
    old_view[0] = 200
    assert segment.array(0, 16).tolist() == [200, *range(1, 16)]
    segment.grow(100)
    assert segment.capacity == 3 * 4096
    assert os.fstat(segment.fd).st_size == 3 * 4096


def test_refresh_after_another_attachment_grows(segment: SharedSegment) -> None:
    other = SharedSegment.attach(os.dup(segment.fd))
    try:
        assert other.capacity == segment.capacity
        assert segment.refresh() is False
        other.grow(5 * 4096)
        other.array()[5 * 4096 - 1] = 42
        assert segment.capacity == 4096
        assert segment.refresh() is True
        assert segment.capacity == 5 * 4096
        assert segment.array()[-1] == 42
    finally:
        other.close()


def test_refresh_after_another_process_grows(segment: SharedSegment) -> None:
    script = textwrap.dedent(
        f"""
        from dali_lite_shm import SharedSegment
        seg = SharedSegment.attach({segment.fd})
        seg.grow(40960)
        seg.array()[40959] = 7
        seg.close()
        """
    )
    run_in_session([sys.executable, "-c", script], pass_fds=(segment.fd,), check=True,
                   timeout=30)
    assert segment.refresh() is True
    assert segment.capacity == 40960
    assert segment.array()[40959] == 7


def test_attach_rejects_non_file() -> None:
    read_fd, write_fd = os.pipe()
    try:
        with pytest.raises(ShmError, match="not a shared-memory file"):
            SharedSegment.attach(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_lease_derived_views_keep_it_alive_and_release_once(segment: SharedSegment) -> None:
    ends: LeaseEnds[str] = LeaseEnds()
    lease = segment.lease(64, ends, "the slot")
    assert lease.dtype == np.uint8 and lease.shape == (64,) and lease.flags.writeable
    floats = lease[8:40].view(np.float64).reshape(2, 2)
    piece = floats[1, ::-1]
    del lease, floats
    gc.collect()
    assert not ends.pending and ends.take() == []
    piece[:] = 1.5
    assert segment.array(24, 8).view(np.float64)[0] == 1.5
    del piece
    gc.collect()
    assert ends.pending
    assert ends.take() == ["the slot"]
    gc.collect()
    assert not ends.pending and ends.take() == [] and ends.leased == 0


def test_lease_without_callback_and_bounds(segment: SharedSegment) -> None:
    lease = segment.lease(4096)
    assert lease.size == 4096
    with pytest.raises(ValueError, match="outside"):
        segment.lease(4097)
    with pytest.raises(ValueError, match="outside"):
        segment.array(4000, 200)


def test_lease_survives_grow_and_close() -> None:
    seg = SharedSegment.create(4096)
    ends: LeaseEnds[int] = LeaseEnds()
    lease = seg.lease(4096, ends, 7)
    lease[:3] = [9, 8, 7]
    seg.grow(8192)
    seg.close()
    seg.close()  # idempotent
    assert seg.closed
    # The mapping that the lease points into is still alive after close().
    assert lease[:3].tolist() == [9, 8, 7]
    del lease
    gc.collect()
    assert ends.take() == [7]


def test_closed_segment_refuses_work() -> None:
    seg = SharedSegment.create(0)
    seg.close()
    for call in (lambda: seg.grow(10), seg.refresh, seg.array, lambda: seg.lease(0)):
        with pytest.raises(ShmError, match="closed"):
            call()


def test_limit_env_raises_allocation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHM_LIMIT_ENV, str(shm_bytes_in_use() + 64 * 1024))
    with pytest.raises(ShmAllocationError) as info:
        SharedSegment.create(128 * 1024)
    err = info.value
    assert isinstance(err, MemoryError)
    assert err.requested_bytes == 128 * 1024
    assert err.available_bytes == 64 * 1024
    # Nothing here knows of samples or hints: the advice is what does help, more room.
    assert f"To fix it, raise {SHM_LIMIT_ENV} (now {err.limit_bytes}) or unset it" in str(err)
    assert "bytes_per_sample_hint" not in str(err)
    # Within budget works, and closing gives the budget back.
    first = SharedSegment.create(64 * 1024)
    with pytest.raises(ShmAllocationError):
        first.grow(64 * 1024 + 1)
    assert first.capacity == 64 * 1024
    first.close()
    SharedSegment.create(64 * 1024).close()


def test_invalid_limit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHM_LIMIT_ENV, "lots")
    with pytest.raises(ShmError, match=SHM_LIMIT_ENV):
        SharedSegment.create(10)


def test_fallocate_failure_becomes_allocation_error(
    segment: SharedSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module.os, "posix_fallocate", full)
    before = shm_bytes_in_use()
    with pytest.raises(ShmAllocationError, match="No space left"):
        segment.grow(1 << 20)
    assert segment.capacity == 4096
    assert os.fstat(segment.fd).st_size == 4096  # truncated back
    assert shm_bytes_in_use() == before


def test_allocation_error_pickles() -> None:
    err = pickle.loads(pickle.dumps(ShmAllocationError(10, 5, "detail")))
    assert (err.requested_bytes, err.available_bytes) == (10, 5)
    assert "detail" in str(err)


def test_gc_without_close_releases_fd() -> None:
    seg = SharedSegment.create(4096, name="gc-probe")
    fd = seg.fd
    del seg
    gc.collect()
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        target = ""
    assert "gc-probe" not in target


def _allocated_bytes(seg: SharedSegment) -> int:
    return os.fstat(seg.fd).st_blocks * 512


def test_unreserved_segment_is_reserved_by_its_writer() -> None:
    seg = SharedSegment.create(1 << 20, reserve=False)
    try:
        assert seg.capacity == 1 << 20 and _allocated_bytes(seg) == 0  # sparse until written
        seg.prepare_write(100_000)
        # Whole pages, at least the range asked for; not the rest of the segment.
        assert 100_000 <= _allocated_bytes(seg) < 1 << 20
        seg.prepare_write(10 << 20)  # more than the capacity: everything, and no more
        assert _allocated_bytes(seg) == 1 << 20
        seg.array()[:] = 7
        assert int(seg.array().sum()) == 7 << 20
    finally:
        seg.close()


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 3 << 16), min_size=1, max_size=6))
def test_prepare_write_reserves_each_range_once(sizes: list[int]) -> None:
    calls: list[tuple[int, int]] = []
    real = segment_module.os.posix_fallocate

    def counting(fd: int, offset: int, length: int) -> None:
        calls.append((offset, length))
        real(fd, offset, length)

    seg = SharedSegment.create(1 << 17, reserve=False)
    try:
        segment_module.os.posix_fallocate = counting  # hypothesis and monkeypatch do not mix
        try:
            for size in sizes:
                seg.prepare_write(size)
        finally:
            segment_module.os.posix_fallocate = real
        covered = 0
        for offset, length in calls:
            assert offset == covered and length > 0  # each call takes up where the last ended
            covered += length
        largest = min(max(sizes), seg.capacity)
        assert covered >= largest and covered - largest < os.sysconf("SC_PAGE_SIZE")
        assert _allocated_bytes(seg) >= covered
    finally:
        seg.close()


def test_prepare_write_failure_becomes_allocation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    seg = SharedSegment.create(1 << 20, reserve=False)
    try:
        def full(fd: int, offset: int, length: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(segment_module.os, "posix_fallocate", full)
        with pytest.raises(ShmAllocationError, match="No space left") as info:
            seg.prepare_write(5000)
        page = os.sysconf("SC_PAGE_SIZE")
        assert info.value.requested_bytes == -(-5000 // page) * page  # whole pages
        monkeypatch.undo()
        seg.prepare_write(5000)  # nothing was marked reserved by the failed attempt
        assert _allocated_bytes(seg) >= 5000
    finally:
        seg.close()
    with pytest.raises(ShmError, match="closed"):
        seg.prepare_write(1)


def test_a_worker_filling_an_unreserved_slot_is_read_back_by_the_creator() -> None:
    from dali_lite_shm import read

    seg = SharedSegment.create(1 << 16, reserve=False)
    try:
        script = textwrap.dedent(f"""
            import os, numpy as np
            from dali_lite_shm import SharedSegment, SlotWriter
            seg = SharedSegment.attach(os.dup({seg.fd}))
            layout = SlotWriter(seg).write([[np.arange(1000, dtype=np.int32)] * 3])
            print(layout.meta_offset, layout.meta_nbytes, layout.used_nbytes)
        """)
        done = run_in_session([sys.executable, "-c", script], capture_output=True, text=True,
                              pass_fds=(seg.fd,), check=True, timeout=60)
        meta_offset, meta_nbytes, used = map(int, done.stdout.split())
        assert _allocated_bytes(seg) >= used  # the writer reserved what it wrote
        samples = read(seg.lease(used), meta_offset, meta_nbytes)[0]
        assert len(samples) == 3
        for sample in samples:
            np.testing.assert_array_equal(sample, np.arange(1000, dtype=np.int32))
    finally:
        seg.close()


def test_prepare_write_without_madvise_populate_still_reserves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kernels before 5.14 have no MADV_POPULATE_WRITE: the reservation must not depend on it.
    monkeypatch.setattr(mapping_module, "_populate_supported", False)
    seg = SharedSegment.create(1 << 16, reserve=False)
    try:
        seg.prepare_write(1 << 16)
        assert _allocated_bytes(seg) == 1 << 16
        seg.array()[:] = 3
        assert int(seg.array().sum()) == 3 << 16
    finally:
        seg.close()


@pytest.mark.parametrize("reserve", [True, False])
def test_create_and_grow_check_free_memory_before_touching_the_file(
    monkeypatch: pytest.MonkeyPatch, reserve: bool
) -> None:
    """docs/shared-memory.md: "creating or growing a slot checks free memory first". With the system
    reporting 1 MiB free, asking for more fails before the file is truncated or reserved."""
    free = 1 << 20
    monkeypatch.delenv(SHM_LIMIT_ENV, raising=False)
    monkeypatch.setattr(budget, "available_memory_bytes", lambda: free)
    touched: list[str] = []
    real_ftruncate, real_fallocate = os.ftruncate, os.posix_fallocate
    monkeypatch.setattr(segment_module.os, "ftruncate",
                        lambda fd, n: (touched.append("ftruncate"), real_ftruncate(fd, n))[1])
    monkeypatch.setattr(segment_module.os, "posix_fallocate",
                        lambda fd, o, n: (touched.append("fallocate"),
                                          real_fallocate(fd, o, n))[1])
    with pytest.raises(ShmAllocationError) as created:
        SharedSegment.create(2 * free, name="test", reserve=reserve)
    assert created.value.requested_bytes == 2 * free
    assert created.value.available_bytes == free
    assert f"{free} bytes available" in str(created.value)
    assert touched == []
    seg = SharedSegment.create(free // 2, name="test", reserve=reserve)
    try:
        touched.clear()
        with pytest.raises(ShmAllocationError) as grown:
            seg.grow(free * 3, reserve=reserve)
        assert grown.value.requested_bytes == free * 3 - free // 2
        assert grown.value.available_bytes == free
        assert touched == []
        assert seg.capacity == free // 2 and os.fstat(seg.fd).st_size == free // 2
    finally:
        seg.close()


def test_leased_mapping_names_the_mapping_of_a_leased_view_and_its_end() -> None:
    import weakref

    from dali_lite_shm import leased_mapping

    segment = SharedSegment.create(1 << 16)
    view = segment.lease(4096)[128:256].view(np.uint32).reshape(4, 8)
    found = leased_mapping(view)
    assert found is not None
    mapping, address, size = found
    assert address == segment.array().ctypes.data and size == segment.capacity
    assert leased_mapping(np.zeros(4)) is None and leased_mapping(view.copy()) is None
    gone = []
    reference = weakref.ref(mapping, gone.append)
    del mapping, found
    segment.close()
    gc.collect()
    assert not gone  # the view still holds the mapping
    del view
    gc.collect()
    assert reference() is None and gone


def test_a_forked_child_counts_only_what_it_grows_itself() -> None:
    # The budget is per process: a child forked after its parent grew segments holds none of
    # them, so under a cap that the parent's segments already exceed the child still grows.
    script = textwrap.dedent(f"""
        import os
        from dali_lite_shm import SharedSegment, shm_bytes_in_use
        parent = SharedSegment.create(8 << 20)
        os.environ[{SHM_LIMIT_ENV!r}] = str(4 << 20)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            before = shm_bytes_in_use()
            try:
                child = SharedSegment.create(1 << 20)
                child.grow(2 << 20)
                report = f"{{before}} {{shm_bytes_in_use()}}"
            except Exception as error:
                report = f"{{before}} {{type(error).__name__}}: {{error}}"
            os.write(write, report.encode())
            os._exit(0)
        os.close(write)
        report = os.read(read, 4096).decode()
        os.waitpid(pid, 0)
        print(shm_bytes_in_use(), report)
    """)
    done = run_in_session([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=60)
    parent_count, child_before, child_after = done.stdout.split(maxsplit=2)
    assert int(parent_count) == 8 << 20
    assert int(child_before) == 0
    assert child_after.strip() == str(2 << 20), child_after
