"""What DALI's operator objects that run the user's code (`NumbaFunction`,
`TorchPythonFunction`) tell of themselves: the device they were made for, and `preserve`,
which is True whatever was given, since DALI never prunes an operator running user code."""

from __future__ import annotations

from typing import Any

__all__ = ["UserCodeOperator"]


class UserCodeOperator:
    """A base for an operator object that stores its arguments in `_arguments`."""

    _arguments: dict[str, Any]

    @property
    def device(self) -> str:
        return str(self._arguments["device"])

    @property
    def preserve(self) -> bool:
        return True
