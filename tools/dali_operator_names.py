"""Generate `dali_lite/_src/api/dali_operator_names.py`: the operator names of NVIDIA DALI's
`fn` module, as the installed `nvidia.dali` has them.

    python tools/dali_operator_names.py            # print the module's text
    python tools/dali_operator_names.py --write    # write it into the package
    python tools/dali_operator_names.py --list     # one name a line (what the test compares)

It walks `nvidia.dali.fn` and its operator submodules (`fn.random`, `fn.readers`,
`fn.experimental.decoders`, ...) and lists every public callable, by the dotted path a
program writes after `fn.`. Run it in a fresh interpreter: DALI's plugins (numba, pytorch)
add names to `fn` when imported, and those are not part of `fn` itself.
`tests/api/test_missing_operators.py` runs `--list` against the installed DALI, so the
stored list cannot go stale silently.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "dali_lite/_src/api/dali_operator_names.py"

_HEADER = '''"""The names of NVIDIA DALI {version}'s `fn` operators, by the dotted path a program
writes after `fn.`: `"cast"`, `"random.uniform"`, `"readers.file"`, `"experimental.decoders.image"`.

Plain data, generated from the installed `nvidia.dali` by `tools/dali_operator_names.py`
(`python tools/dali_operator_names.py --write` regenerates it; do not edit by hand).
`dali_lite.fn` uses it to tell a DALI operator that dali_lite does not implement yet from a
misspelt name (`dali_lite/_src/api/missing_operators.py`);
`tests/api/test_missing_operators.py` checks it against the installed DALI.
"""

DALI_VERSION = "{version}"

OPERATORS: tuple[str, ...] = (
'''


def operator_names() -> list[str]:
    """Every public callable of `nvidia.dali.fn` and its operator submodules, sorted."""
    import nvidia.dali.fn as fn

    names: set[str] = set()
    seen: set[int] = set()

    def walk(module: types.ModuleType, prefix: str) -> None:
        seen.add(id(module))
        for name in dir(module):
            if name.startswith("_"):
                continue
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                # Only DALI's operator submodules (fn imports `sys`, for one).
                if value.__name__.startswith("nvidia.dali.fn.") and id(value) not in seen:
                    walk(value, f"{prefix}{name}.")
            elif callable(value):
                names.add(prefix + name)

    walk(fn, "")
    return sorted(names)


def module_text() -> str:
    """The text of the data module, for the installed DALI."""
    import nvidia.dali

    lines = [_HEADER.format(version=nvidia.dali.__version__)]
    lines.extend(f'    "{name}",\n' for name in operator_names())
    lines.append(")\n")
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {TARGET.name}")
    mode.add_argument("--list", action="store_true", help="print the names, one a line")
    args = parser.parse_args()
    if args.list:
        print("\n".join(operator_names()))
    elif args.write:
        TARGET.write_text(module_text())
    else:
        sys.stdout.write(module_text())


if __name__ == "__main__":
    main()
