"""Each framework plugin, without its framework, says what to install.

Every path a DALI program uses (`from ...plugin.jax import DALIGenericIterator`, a
`numba_function` in a graph, `import ...plugin.pytorch`) either works or raises an
ImportError naming the pip extra, never a bare `ModuleNotFoundError: No module named 'jax'`.
Each case runs in a child interpreter where the framework cannot be imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_GRAPH = """
import numpy as np
import dali_lite as dali
from dali_lite import types
pipe = dali.Pipeline(batch_size=1, num_threads=1, device_id=None)
node = dali.fn.external_source(lambda: [np.zeros(1, np.float32)], batch=True)
"""

CASES = {
    "jax-iterator": ("jax", "from dali_lite.plugin.jax import DALIGenericIterator",
                     "pip install -e '.[jax]'"),
    "jax-data-iterator": ("jax", "from dali_lite.plugin.jax import data_iterator",
                          "pip install -e '.[jax]'"),
    "jax-iterator-module": ("jax", "import dali_lite.plugin.jax.iterator",
                            "pip install -e '.[jax]'"),
    "jax-function": ("jax", _GRAPH + """
import dali_lite.plugin.jax as dax
with pipe:
    dax.fn.jax_function(lambda x: x)(node)
""", "pip install -e '.[jax]'"),
    "numba-function": ("numba", _GRAPH + """
from dali_lite.plugin.numba.fn.experimental import numba_function
with pipe:
    numba_function(node, run_fn=lambda out, inp: None, in_types=[types.FLOAT],
                   out_types=[types.FLOAT], ins_ndim=[1], outs_ndim=[1])
""", "pip install -e '.[numba]'"),
    "numba-operator": ("numba", _GRAPH + """
from dali_lite.plugin.numba.experimental import NumbaFunction
with pipe:
    NumbaFunction(run_fn=lambda out, inp: None, in_types=[types.FLOAT],
                  out_types=[types.FLOAT], ins_ndim=[1], outs_ndim=[1])(node)
""", "pip install -e '.[numba]'"),
    "pytorch": ("torch", "import dali_lite.plugin.pytorch", "pip install -e '.[torch]'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plugin_without_its_framework_says_what_to_install(case: str) -> None:
    framework, code, hint = CASES[case]
    # None in sys.modules: `import <framework>` fails as if it were not installed.
    program = f"import sys\nsys.modules[{framework!r}] = None\n" + textwrap.dedent(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=90, env=env, cwd=ROOT)
    assert done.returncode != 0, f"{case} worked without {framework}"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(("ImportError:", "ModuleNotFoundError:")), done.stderr[-2000:]
    assert hint in last, done.stderr[-2000:]
    assert "None in sys.modules" not in last
