"""DALI's small constants of `nvidia.dali.types` beside its enums: the layout names
(`types.NHWC` is `"HWC"`: DALI's layouts leave the batch dimension out), `SAME`,
`CPU_ONLY_DEVICE_ID` and `PipelineAPIType` (the three ways of running a pipeline, as DALI names
them). Plain values, the same as DALI's; imports nothing but the standard library.
"""

from __future__ import annotations

import enum

NCHW = "CHW"
NHWC = "HWC"
NFCHW = "FCHW"
NFHWC = "FHWC"
SAME = ""

# DALI's stand-in for "no GPU"; its `Pipeline.device_id` reads it as None.
CPU_ONLY_DEVICE_ID = -99999


class PipelineAPIType(enum.Enum):
    """Pipeline API type: `run()` (BASIC), the framework iterators (ITERATOR), or
    `schedule_run()`/`share_outputs()` (SCHEDULED)."""

    __module__ = "dali_lite.types"  # where users import it from (and see it named)

    BASIC = 0
    ITERATOR = 1
    SCHEDULED = 2
