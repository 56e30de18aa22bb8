"""`asyncflow.serving`: load an exported model and serve it from an asyncio service.

    model = await asyncflow.serving.aload(export_dir, batching={"max_batch_size": 64})
    outputs = await model.predict({"x": batch})

`Batcher` merges concurrent requests into one step (TF Serving's knobs); its metrics
(batch-size histogram, queue time, latency percentiles) are readable at run time.
"""

from asyncflow.batching import Batcher, BatchingMetrics
from asyncflow.serving.model import (
    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    ServableModel,
    Signature,
    aload,
    load,
)

__all__ = [
    "Batcher",
    "BatchingMetrics",
    "ServableModel",
    "Signature",
    "load",
    "aload",
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY",
]
