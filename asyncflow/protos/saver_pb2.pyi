from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SaverDef(_message.Message):
    __slots__ = ("filename_tensor_name", "save_tensor_name", "restore_op_name", "max_to_keep", "sharded", "keep_checkpoint_every_n_hours", "version")
    class CheckpointFormatVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LEGACY: _ClassVar[SaverDef.CheckpointFormatVersion]
        V1: _ClassVar[SaverDef.CheckpointFormatVersion]
        V2: _ClassVar[SaverDef.CheckpointFormatVersion]
    LEGACY: SaverDef.CheckpointFormatVersion
    V1: SaverDef.CheckpointFormatVersion
    V2: SaverDef.CheckpointFormatVersion
    FILENAME_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    SAVE_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    RESTORE_OP_NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_TO_KEEP_FIELD_NUMBER: _ClassVar[int]
    SHARDED_FIELD_NUMBER: _ClassVar[int]
    KEEP_CHECKPOINT_EVERY_N_HOURS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    filename_tensor_name: str
    save_tensor_name: str
    restore_op_name: str
    max_to_keep: int
    sharded: bool
    keep_checkpoint_every_n_hours: float
    version: SaverDef.CheckpointFormatVersion
    def __init__(self, filename_tensor_name: _Optional[str] = ..., save_tensor_name: _Optional[str] = ..., restore_op_name: _Optional[str] = ..., max_to_keep: _Optional[int] = ..., sharded: _Optional[bool] = ..., keep_checkpoint_every_n_hours: _Optional[float] = ..., version: _Optional[_Union[SaverDef.CheckpointFormatVersion, str]] = ...) -> None: ...
