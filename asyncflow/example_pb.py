"""tf.train.Example and friends: the protobuf messages, plus the ParseExample fast path.

The messages are the generated classes of asyncflow/protos/{example,feature}.proto (TF's
names and field numbers), so `Example`, `Features`, `Feature`, `BytesList`,
`FloatList`, `Int64List`, `SequenceExample`, `FeatureList` and `FeatureLists` have
protobuf's whole API and produce TF's bytes and text format.  `DecodeError` is
protobuf's `message.DecodeError`.

The ParseExample kernel (ops/parsing_ops.py) parses batches of these with protobuf too.
"""

from __future__ import annotations

from google.protobuf import message as _message

from asyncflow.protos.example_pb2 import Example, SequenceExample
from asyncflow.protos.feature_pb2 import (
    BytesList,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
)

__all__ = [
    "Example",
    "SequenceExample",
    "Features",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "BytesList",
    "FloatList",
    "Int64List",
    "DecodeError",
]


DecodeError = _message.DecodeError
