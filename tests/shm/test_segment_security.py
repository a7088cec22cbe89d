"""Segments are private to the user that runs the pipeline, and nothing is left named.

memfd segments have no name in any filesystem (only ``/proc/<pid>/fd``, which the kernel
guards with ptrace access checks); the fallback for kernels or sandboxes without memfd is a
``mkstemp`` file, mode 0o600 and owned by us, unlinked before ``create`` returns.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

import pytest

import dali_lite_shm.mapping as mapping_module
from dali_lite_shm import SharedSegment


def _no_memfd(name: str, flags: int = 0) -> int:
    raise OSError(errno.ENOSYS, "memfd_create is not available here")


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(os, "memfd_create", _no_memfd)
    yield


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd on this platform")
def test_memfd_segments_have_no_name() -> None:
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    segment = SharedSegment.create(4096, name="dali_lite-private")
    try:
        target = os.readlink(f"/proc/self/fd/{segment.fd}")
        assert target.startswith("/memfd:dali_lite-private")
        info = os.fstat(segment.fd)
        assert info.st_nlink == 0, "a memfd is never linked into a directory"
        assert info.st_uid == os.getuid()
        after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
        assert after == before
        # Not inherited by programs this process execs.
        assert os.get_inheritable(segment.fd) is False
    finally:
        segment.close()


@pytest.mark.parametrize("dev_shm", ["/dev/shm", "/nonexistent/dali_lite"],
                         ids=["dev-shm", "temp-dir"])
def test_fallback_files_are_private_and_unlinked(
    fallback: None, monkeypatch: pytest.MonkeyPatch, dev_shm: str
) -> None:
    monkeypatch.setattr(mapping_module, "_DEV_SHM", dev_shm)
    segment = SharedSegment.create(4096, name="dali_lite-fallback")
    try:
        info = os.fstat(segment.fd)
        assert stat.S_ISREG(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
        assert info.st_uid == os.getuid()
        assert info.st_nlink == 0, "the file must be unlinked before create() returns"
        assert "(deleted)" in os.readlink(f"/proc/self/fd/{segment.fd}")
        assert os.get_inheritable(segment.fd) is False
        # Still a working segment.
        segment.array(0, 4096)[:] = 7
        assert int(segment.array(0, 4096).sum()) == 7 * 4096
    finally:
        segment.close()


def test_fallback_leaves_nothing_in_dev_shm(fallback: None) -> None:
    before = set(os.listdir("/dev/shm"))
    segments = [SharedSegment.create(1024, name="dali_lite-leftover") for _ in range(3)]
    assert not [n for n in set(os.listdir("/dev/shm")) - before if "dali_lite" in n]
    for segment in segments:
        segment.close()


def test_other_errors_of_memfd_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_fds(name: str, flags: int = 0) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "memfd_create", out_of_fds)
    with pytest.raises(OSError) as info:
        SharedSegment.create(16)
    assert info.value.errno == errno.EMFILE
