"""How the tensor classes print: DALI 2.4's ``str()`` and ``repr()``, character for character.

``str()`` shows the data, ``repr()`` leaves it out; both list ``dtype``, ``layout`` (when there
is one), ``device`` and the shape (a tuple for a tensor; per sample, shortened at the ends for
long batches, for a batch). A batch prints its samples one by one, each formatted by NumPy on
its own, and a long batch of many elements shows its first and last two samples only. The
classes hand over plain values (arrays already on the host), so this module knows nothing of
where data lives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_INDENT = " " * 4
_EDGE_ITEMS = 2  # elements shown at each end of a summarized array axis or shape list
_EDGE_SAMPLES = 2  # samples shown at each end of a summarized batch


def _join(texts: list[str], sep: str = ", ", edge: int | None = None,
          force_ellipsis: bool = False) -> str:
    """Join `texts`; with `edge`, keep `edge` at each end and put "..." between."""
    if edge is not None and force_ellipsis:
        texts = [*texts[:edge], "...", *texts[edge:]]
    elif edge is not None and len(texts) > 2 * edge + 1:
        texts = [*texts[:edge], "...", *texts[-edge:]]
    return sep.join(texts)


def format_tensor(type_name: str, device: str, dtype: Any, layout: str,
                  shape: Sequence[int], data: Callable[[], np.ndarray] | None) -> str:
    """A tensor as DALI prints it; `data` gives the host array (None: leave the data out)."""
    params = [] if data is None else [
        np.array2string(data(), prefix=_INDENT, edgeitems=_EDGE_ITEMS)]
    params.append(f"dtype={dtype}")
    if layout:
        params.append(f'layout="{layout}"')
    params += [f'device="{device}"', f"shape={tuple(shape)})"]
    return f"{type_name}(\n{_INDENT}" + _join(params, sep=",\n" + _INDENT)


def format_batch(type_name: str, device: str, dtype: Any, layout: str,
                 shapes: Sequence[tuple[int, ...]],
                 samples: Callable[[list[int]], list[np.ndarray]] | None) -> str:
    """A batch as DALI prints it; `samples(indices)` gives those samples as host arrays (None:
    leave the data out)."""
    params: list[str] = []
    count = len(shapes)
    if samples is not None:
        text = "[]"
        if count:
            total = sum(max(int(np.prod(shape, dtype=np.int64)), 1) for shape in shapes)
            crop = count > 2 * _EDGE_SAMPLES + 1 and total > 1000
            indices = (list(range(_EDGE_SAMPLES)) + list(range(count - _EDGE_SAMPLES, count))
                       if crop else list(range(count)))
            arrays = samples(indices)
            ndim = arrays[0].ndim
            sep = ", " if ndim == 0 else ",\n" + "\n" * (ndim - 1) + _INDENT
            texts = [np.array2string(a, prefix=_INDENT, edgeitems=_EDGE_ITEMS) for a in arrays]
            text = "[" + _join(texts, sep=sep, edge=_EDGE_SAMPLES if crop else None,
                               force_ellipsis=crop) + "]"
        params.append(text)
    params.append(f"dtype={dtype}")
    if layout:
        params.append(f'layout="{layout}"')
    params += [f'device="{device}"', f"num_samples={count}",
               f"shape=[{_shape_list(shapes)}])"]
    return f"{type_name}(\n{_INDENT}" + _join(params, sep=",\n" + _INDENT)


def _shape_list(shapes: Sequence[tuple[int, ...]]) -> str:
    """The per-sample shapes, shortened to their ends when long, broken into lines when wide."""
    count = len(shapes)
    crop = count > 16 or (count > 2 * _EDGE_ITEMS + 1 and count * len(shapes[0]) > 100)
    texts = [str(tuple(shape)) for shape in shapes]
    edge = _EDGE_ITEMS if crop else None
    text = _join(texts, edge=edge)
    if len(text) > 75:
        text = _join(texts, sep=", \n" + _INDENT + " " * len("shape=["), edge=edge)
    return text
