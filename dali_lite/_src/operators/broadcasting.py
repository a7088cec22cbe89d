"""DALI's checks of the sample shapes an arithmetic expression broadcasts, with DALI's words.

Sample by sample, the operands' shapes (aligned to the right) must agree in each dimension
or be 1 there; the first dimension, counted from the last, where they do not is named for
each operand: ``2 x 3 x 4 (d=2, belonging to sample_idx=0)``. Then, where the operands need
broadcasting at all (their shapes differ and more than one is not a single element), DALI
simplifies each sample's shapes into groups of dimensions that broadcast alike (adjacent
dimensions merge where every operand has the same extents there, or extents and ones in the
same places) and refuses more than `MAX_GROUPS` groups. Extents of 0 are left to NumPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dali_lite._src.errors import RuntimeValueError

__all__ = ["MAX_GROUPS", "check_broadcast", "dimension_groups"]

#: The most groups of dimensions DALI's arithmetic kernels broadcast over.
MAX_GROUPS = 6

Shape = tuple[int, ...]


def _mismatch(shapes: Sequence[Shape]) -> int | None:
    """The first dimension counted from the last (0: the last) where `shapes` do not
    broadcast, or None."""
    ndim = max(len(s) for s in shapes)
    for rev_d in range(ndim):
        target = 1
        for shape in shapes:
            extent = shape[len(shape) - 1 - rev_d] if rev_d < len(shape) else 1
            if extent > 1 and extent != target:
                if target > 1:
                    return rev_d
                target = extent
    return None


def _can_merge_next(shapes: Sequence[Shape], dim: int) -> bool:
    """Whether dimension `dim` and the next broadcast alike in every operand (so that one
    group holds both)."""
    def same(d: int) -> bool:
        return len({s[d] for s in shapes}) == 1

    def ones(d: int) -> bool:
        return all(s[d] == 1 for s in shapes)

    def same_or_one(d: int) -> bool:
        return len({s[d] for s in shapes if s[d] != 1}) <= 1

    if same(dim) and same(dim + 1):
        return True
    if not (same_or_one(dim) and same_or_one(dim + 1)):
        return False
    # A one that starts or ends where another operand's extent does not is a new group.
    return not any((s[dim] != 1 and s[dim + 1] == 1 and not ones(dim + 1))
                   or (s[dim] == 1 and not ones(dim) and s[dim + 1] != 1) for s in shapes)


def _compatible(volumes: list[int]) -> bool:
    return len({v for v in volumes if v != 1}) <= 1


def dimension_groups(shapes: Sequence[Shape]) -> int:
    """How many groups of dimensions one sample's operand shapes simplify to (DALI's rule)."""
    ndim = max(len(s) for s in shapes)
    full = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    merged = 0  # dimensions folded into the one before them
    i = 0
    while i < ndim - 1:
        volumes = [s[i] for s in full]
        if not _compatible(volumes):
            i += 1
            continue
        j = i + 1
        while j < ndim:
            volumes = [v * s[j] for v, s in zip(volumes, full)]
            if not (_compatible(volumes) and _can_merge_next(full, j - 1)):
                break
            j += 1
        merged += j - i - 1
        i = j
    return ndim - merged


def _scalar_like(samples: Sequence[Shape]) -> bool:
    return all(math.prod(s) == 1 for s in samples)


def _need_broadcasting(operands: Sequence[Sequence[Shape]]) -> bool:
    previous = operands[0]
    for current in operands[1:]:
        if _scalar_like(previous):
            previous = current
        elif not _scalar_like(current) and list(previous) != list(current):
            return True
    return False


def check_broadcast(where: str, operands: Sequence[Sequence[Shape]]) -> None:
    """Refuse, as DALI, operand shapes (per operand, per sample) that do not broadcast or
    broadcast in more than `MAX_GROUPS` groups. `where` opens the message."""
    if len(operands) < 2:
        return
    # Each distinct combination once (a dense batch has one), at its first sample.
    distinct: dict[tuple[Shape, ...], int] = {}
    for sample_idx, shapes in enumerate(zip(*operands)):
        distinct.setdefault(tuple(tuple(s) for s in shapes), sample_idx)
    for shapes, sample_idx in distinct.items():
        if any(0 in s for s in shapes):
            continue
        rev_d = _mismatch(shapes)
        if rev_d is not None:
            lines = "".join(
                f"\n{' x '.join(map(str, s))} (d={len(s) - rev_d - 1}, belonging to "
                f"sample_idx={sample_idx})" for s in shapes)
            raise RuntimeValueError(
                f"{where}: Can't broadcast shapes: {lines}\n(the sample shapes of the operands "
                "of an arithmetic expression must broadcast as NumPy's do: equal, or 1, in "
                "each dimension counted from the last)")
    if not _need_broadcasting(operands):
        return
    for shapes in distinct:
        if any(0 in s for s in shapes):
            continue
        groups = dimension_groups(shapes)
        if groups > MAX_GROUPS:
            raise RuntimeValueError(
                f"{where}: Broadcasting pattern too complex. Can't operate with simplified "
                f"shapes with more than {MAX_GROUPS} groups of dimensions. Got {groups} "
                "groups. For more details see "
                "https://docs.nvidia.com/deeplearning/dali/user-guide/docs/math.html")
