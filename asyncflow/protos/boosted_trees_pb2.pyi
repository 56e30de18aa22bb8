from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SplitTypeWithDefault(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INEQUALITY_DEFAULT_LEFT: _ClassVar[SplitTypeWithDefault]
    INEQUALITY_DEFAULT_RIGHT: _ClassVar[SplitTypeWithDefault]
    EQUALITY_DEFAULT_RIGHT: _ClassVar[SplitTypeWithDefault]

class DefaultDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEFAULT_LEFT: _ClassVar[DefaultDirection]
    DEFAULT_RIGHT: _ClassVar[DefaultDirection]
INEQUALITY_DEFAULT_LEFT: SplitTypeWithDefault
INEQUALITY_DEFAULT_RIGHT: SplitTypeWithDefault
EQUALITY_DEFAULT_RIGHT: SplitTypeWithDefault
DEFAULT_LEFT: DefaultDirection
DEFAULT_RIGHT: DefaultDirection

class Node(_message.Message):
    __slots__ = ("leaf", "bucketized_split", "categorical_split", "dense_split", "metadata")
    LEAF_FIELD_NUMBER: _ClassVar[int]
    BUCKETIZED_SPLIT_FIELD_NUMBER: _ClassVar[int]
    CATEGORICAL_SPLIT_FIELD_NUMBER: _ClassVar[int]
    DENSE_SPLIT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    leaf: Leaf
    bucketized_split: BucketizedSplit
    categorical_split: CategoricalSplit
    dense_split: DenseSplit
    metadata: NodeMetadata
    def __init__(self, leaf: _Optional[_Union[Leaf, _Mapping]] = ..., bucketized_split: _Optional[_Union[BucketizedSplit, _Mapping]] = ..., categorical_split: _Optional[_Union[CategoricalSplit, _Mapping]] = ..., dense_split: _Optional[_Union[DenseSplit, _Mapping]] = ..., metadata: _Optional[_Union[NodeMetadata, _Mapping]] = ...) -> None: ...

class NodeMetadata(_message.Message):
    __slots__ = ("gain", "original_leaf")
    GAIN_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_LEAF_FIELD_NUMBER: _ClassVar[int]
    gain: float
    original_leaf: Leaf
    def __init__(self, gain: _Optional[float] = ..., original_leaf: _Optional[_Union[Leaf, _Mapping]] = ...) -> None: ...

class Leaf(_message.Message):
    __slots__ = ("vector", "sparse_vector", "scalar")
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    SPARSE_VECTOR_FIELD_NUMBER: _ClassVar[int]
    SCALAR_FIELD_NUMBER: _ClassVar[int]
    vector: Vector
    sparse_vector: SparseVector
    scalar: float
    def __init__(self, vector: _Optional[_Union[Vector, _Mapping]] = ..., sparse_vector: _Optional[_Union[SparseVector, _Mapping]] = ..., scalar: _Optional[float] = ...) -> None: ...

class Vector(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, value: _Optional[_Iterable[float]] = ...) -> None: ...

class SparseVector(_message.Message):
    __slots__ = ("index", "value")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    index: _containers.RepeatedScalarFieldContainer[int]
    value: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, index: _Optional[_Iterable[int]] = ..., value: _Optional[_Iterable[float]] = ...) -> None: ...

class BucketizedSplit(_message.Message):
    __slots__ = ("feature_id", "threshold", "dimension_id", "default_direction", "left_id", "right_id")
    FEATURE_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_ID_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_DIRECTION_FIELD_NUMBER: _ClassVar[int]
    LEFT_ID_FIELD_NUMBER: _ClassVar[int]
    RIGHT_ID_FIELD_NUMBER: _ClassVar[int]
    feature_id: int
    threshold: int
    dimension_id: int
    default_direction: DefaultDirection
    left_id: int
    right_id: int
    def __init__(self, feature_id: _Optional[int] = ..., threshold: _Optional[int] = ..., dimension_id: _Optional[int] = ..., default_direction: _Optional[_Union[DefaultDirection, str]] = ..., left_id: _Optional[int] = ..., right_id: _Optional[int] = ...) -> None: ...

class CategoricalSplit(_message.Message):
    __slots__ = ("feature_id", "value", "dimension_id", "left_id", "right_id")
    FEATURE_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_ID_FIELD_NUMBER: _ClassVar[int]
    LEFT_ID_FIELD_NUMBER: _ClassVar[int]
    RIGHT_ID_FIELD_NUMBER: _ClassVar[int]
    feature_id: int
    value: int
    dimension_id: int
    left_id: int
    right_id: int
    def __init__(self, feature_id: _Optional[int] = ..., value: _Optional[int] = ..., dimension_id: _Optional[int] = ..., left_id: _Optional[int] = ..., right_id: _Optional[int] = ...) -> None: ...

class DenseSplit(_message.Message):
    __slots__ = ("feature_id", "threshold", "left_id", "right_id")
    FEATURE_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    LEFT_ID_FIELD_NUMBER: _ClassVar[int]
    RIGHT_ID_FIELD_NUMBER: _ClassVar[int]
    feature_id: int
    threshold: float
    left_id: int
    right_id: int
    def __init__(self, feature_id: _Optional[int] = ..., threshold: _Optional[float] = ..., left_id: _Optional[int] = ..., right_id: _Optional[int] = ...) -> None: ...

class Tree(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ...) -> None: ...

class TreeMetadata(_message.Message):
    __slots__ = ("num_layers_grown", "is_finalized", "post_pruned_nodes_meta")
    class PostPruneNodeUpdate(_message.Message):
        __slots__ = ("new_node_id", "logit_change")
        NEW_NODE_ID_FIELD_NUMBER: _ClassVar[int]
        LOGIT_CHANGE_FIELD_NUMBER: _ClassVar[int]
        new_node_id: int
        logit_change: _containers.RepeatedScalarFieldContainer[float]
        def __init__(self, new_node_id: _Optional[int] = ..., logit_change: _Optional[_Iterable[float]] = ...) -> None: ...
    NUM_LAYERS_GROWN_FIELD_NUMBER: _ClassVar[int]
    IS_FINALIZED_FIELD_NUMBER: _ClassVar[int]
    POST_PRUNED_NODES_META_FIELD_NUMBER: _ClassVar[int]
    num_layers_grown: int
    is_finalized: bool
    post_pruned_nodes_meta: _containers.RepeatedCompositeFieldContainer[TreeMetadata.PostPruneNodeUpdate]
    def __init__(self, num_layers_grown: _Optional[int] = ..., is_finalized: _Optional[bool] = ..., post_pruned_nodes_meta: _Optional[_Iterable[_Union[TreeMetadata.PostPruneNodeUpdate, _Mapping]]] = ...) -> None: ...

class GrowingMetadata(_message.Message):
    __slots__ = ("num_trees_attempted", "num_layers_attempted", "last_layer_node_start", "last_layer_node_end")
    NUM_TREES_ATTEMPTED_FIELD_NUMBER: _ClassVar[int]
    NUM_LAYERS_ATTEMPTED_FIELD_NUMBER: _ClassVar[int]
    LAST_LAYER_NODE_START_FIELD_NUMBER: _ClassVar[int]
    LAST_LAYER_NODE_END_FIELD_NUMBER: _ClassVar[int]
    num_trees_attempted: int
    num_layers_attempted: int
    last_layer_node_start: int
    last_layer_node_end: int
    def __init__(self, num_trees_attempted: _Optional[int] = ..., num_layers_attempted: _Optional[int] = ..., last_layer_node_start: _Optional[int] = ..., last_layer_node_end: _Optional[int] = ...) -> None: ...

class TreeEnsemble(_message.Message):
    __slots__ = ("trees", "tree_weights", "tree_metadata", "growing_metadata")
    TREES_FIELD_NUMBER: _ClassVar[int]
    TREE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    TREE_METADATA_FIELD_NUMBER: _ClassVar[int]
    GROWING_METADATA_FIELD_NUMBER: _ClassVar[int]
    trees: _containers.RepeatedCompositeFieldContainer[Tree]
    tree_weights: _containers.RepeatedScalarFieldContainer[float]
    tree_metadata: _containers.RepeatedCompositeFieldContainer[TreeMetadata]
    growing_metadata: GrowingMetadata
    def __init__(self, trees: _Optional[_Iterable[_Union[Tree, _Mapping]]] = ..., tree_weights: _Optional[_Iterable[float]] = ..., tree_metadata: _Optional[_Iterable[_Union[TreeMetadata, _Mapping]]] = ..., growing_metadata: _Optional[_Union[GrowingMetadata, _Mapping]] = ...) -> None: ...

class DebugOutput(_message.Message):
    __slots__ = ("feature_ids", "logits_path", "leaf_node_ids")
    FEATURE_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGITS_PATH_FIELD_NUMBER: _ClassVar[int]
    LEAF_NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    feature_ids: _containers.RepeatedScalarFieldContainer[int]
    logits_path: _containers.RepeatedScalarFieldContainer[float]
    leaf_node_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, feature_ids: _Optional[_Iterable[int]] = ..., logits_path: _Optional[_Iterable[float]] = ..., leaf_node_ids: _Optional[_Iterable[int]] = ...) -> None: ...
