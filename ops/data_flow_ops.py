"""Data-flow ops (TF's `data_flow_ops`): queues, accumulators, staging areas, the mutex.

The ops live in `queue_ops`, `accumulator_ops`, `barrier_ops`, `staging_ops` and
`partition_ops`; this module
gathers their public builders under TF's module name.
"""

from asyncflow.ops import accumulator_ops, barrier_ops, queue_ops
from asyncflow.ops.accumulator_ops import *  # noqa: F403
from asyncflow.ops.barrier_ops import *  # noqa: F403
from asyncflow.ops.partition_ops import (
    dynamic_partition,
    dynamic_stitch,
    parallel_dynamic_stitch,
)
from asyncflow.ops.queue_ops import *  # noqa: F403
from asyncflow.ops.staging_ops import MapStagingArea, StagingArea

__all__ = [*queue_ops.__all__, *accumulator_ops.__all__, *barrier_ops.__all__,
           "dynamic_partition", "dynamic_stitch", "parallel_dynamic_stitch",
           "StagingArea", "MapStagingArea"]  # fmt: skip
