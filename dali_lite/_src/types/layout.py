"""``TensorLayout``: a tensor layout, one letter per dimension (``"HWC"``), as DALI's.

A ``str`` subclass so that layouts compare and slice like the strings users write. Imports
nothing of dali_lite.
"""

from __future__ import annotations


class TensorLayout(str):
    """A tensor layout: one letter per dimension (``"HWC"``, ``"FCHW"``); ``""`` is no layout.

    A ``str`` subclass, so it compares equal to, hashes like, and slices like the plain string.
    (DALI's TensorLayout is not a ``str``; it compares with strings and prints as one, which
    this class does too.) The tensor classes' ``layout()`` returns a plain ``str``, as in DALI.
    """

    __slots__ = ()

    def __new__(cls, layout: str) -> TensorLayout:
        if not isinstance(layout, str):
            raise TypeError(
                f"TensorLayout: expected a str such as 'HWC', got {type(layout).__name__} "
                f"{layout!r}"
            )
        return super().__new__(cls, layout)

    @property
    def ndim(self) -> int:
        """Number of dimensions this layout describes (0 for no layout)."""
        return len(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        # As DALI: the qualified name of the class, then the string.
        return f"{type(self).__module__}.TensorLayout({str.__repr__(self)})"

    def __reduce__(self) -> tuple[type[TensorLayout], tuple[str]]:
        return (TensorLayout, (str(self),))


# Reprs and pickles name the public module users import (as DALI's show nvidia.dali.types),
# not this room.
TensorLayout.__module__ = "dali_lite.types"
