"""`af.data`: TF1's `tf.data` as asynchronous pipelines on the session's loop.

    ds = af.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(32).prefetch(1)
    features, labels = ds.make_one_shot_iterator().get_next()

The dataset ops and their element streams are in ops/dataset_ops.py and
ops/dataset_pipeline.py.
"""

from asyncflow.data import experimental
from asyncflow.data import remote as _remote
from asyncflow.data import service as _service
from asyncflow.data import type_specs as _type_specs
from asyncflow.data.calls import function_caller as _function_caller
from asyncflow.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    FixedLengthRecordDataset,
    TextLineDataset,
    TFRecordDataset,
)
from asyncflow.data.iterator import (
    Iterator,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)
from asyncflow.data.options import Options, ThreadingOptions
from asyncflow.data.type_specs import DatasetSpec, NumpyIterator
from asyncflow.ops import dataset_pipeline as _pipeline

_pipeline.FUNCTION_CALLER = _function_caller
# tf.compat.v1.data.experimental's structure names (TypeSpecs under their TF 1 names)
for _name in _type_specs.__all__:
    if _name not in ("DatasetSpec", "NumpyIterator"):
        setattr(experimental, _name, getattr(_type_specs, _name))
_pipeline.PREFETCH_HOOK = _remote.prefetch_hook
experimental.service = _service  # (tf.data.experimental.service)


__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "DatasetSpec",
    "FixedLengthRecordDataset",
    "Iterator",
    "NumpyIterator",
    "Options",
    "TFRecordDataset",
    "TextLineDataset",
    "ThreadingOptions",
    "experimental",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]
