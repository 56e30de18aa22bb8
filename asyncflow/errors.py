"""TensorFlow's error taxonomy (``tf.errors``).

Running a graph raises ``OpError`` subclasses; building one wrongly raises plain
``ValueError``/``TypeError``. Each subclass maps one-to-one to a canonical code.

Invariants:
- ``OpError.args == (message,)`` so instances survive ``copy.copy`` and re-raising.
- ``CancelledError`` here is TF's; it is unrelated to (and must never be confused with)
  ``asyncio.CancelledError``, which is a ``BaseException``.
"""

from __future__ import annotations

from typing import Any

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """A generic error raised while executing a TensorFlow op.

    Attributes ``message``, ``op`` (the failing ``Operation`` or None), ``node_def`` and
    ``error_code`` mirror ``tf.errors.OpError``.
    """

    def __init__(self, node_def: Any, op: Any, message: str, error_code: int | None = None):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    def __reduce__(self):
        # Subclasses take (node_def, op, message); keep copy/copy.deepcopy working for both.
        if type(self) is OpError:
            return OpError, (self._node_def, self._op, self._message, self._error_code)
        return type(self), (self._node_def, self._op, self._message)

    @property
    def message(self) -> str:
        return self._message

    @property
    def op(self) -> Any:
        return self._op

    @property
    def node_def(self) -> Any:
        """The failing op's NodeDef (TF's), built from `op` when not given."""
        if self._node_def is None and self._op is not None:
            node_def = getattr(self._op, "node_def", None)
            if node_def is not None:
                self._node_def = node_def
        return self._node_def

    @property
    def error_code(self) -> int | None:
        return self._error_code

    def __str__(self) -> str:
        return self._message


def _make_error(name: str, code: int, doc: str) -> type[OpError]:
    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


CancelledError = _make_error("CancelledError", CANCELLED, "An operation or step was cancelled.")
UnknownError = _make_error("UnknownError", UNKNOWN, "Unknown error.")
InvalidArgumentError = _make_error(
    "InvalidArgumentError", INVALID_ARGUMENT, "An operation received an invalid argument."
)
DeadlineExceededError = _make_error(
    "DeadlineExceededError", DEADLINE_EXCEEDED, "A deadline expired before the op completed."
)
NotFoundError = _make_error(
    "NotFoundError", NOT_FOUND, "A requested entity (e.g. a file) was not found."
)
AlreadyExistsError = _make_error(
    "AlreadyExistsError", ALREADY_EXISTS, "An entity we attempted to create already exists."
)
PermissionDeniedError = _make_error(
    "PermissionDeniedError", PERMISSION_DENIED, "The caller lacks permission for the op."
)
UnauthenticatedError = _make_error(
    "UnauthenticatedError", UNAUTHENTICATED, "The request lacks valid credentials."
)
ResourceExhaustedError = _make_error(
    "ResourceExhaustedError", RESOURCE_EXHAUSTED, "Some resource (e.g. memory) was exhausted."
)
FailedPreconditionError = _make_error(
    "FailedPreconditionError",
    FAILED_PRECONDITION,
    "The system is not in a state to execute the op (e.g. uninitialized variable).",
)
AbortedError = _make_error(
    "AbortedError", ABORTED, "The operation was aborted, typically due to a concurrent action."
)
OutOfRangeError = _make_error(
    "OutOfRangeError", OUT_OF_RANGE, "An op iterated past the valid range (e.g. closed queue)."
)
UnimplementedError = _make_error(
    "UnimplementedError", UNIMPLEMENTED, "The operation is not implemented or supported."
)
InternalError = _make_error("InternalError", INTERNAL, "An internal invariant was broken.")
UnavailableError = _make_error(
    "UnavailableError", UNAVAILABLE, "The runtime is currently unavailable."
)
DataLossError = _make_error("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")

_CODE_TO_EXCEPTION_CLASS: dict[int, type[OpError]] = {
    CANCELLED: CancelledError,
    UNKNOWN: UnknownError,
    INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError,
    NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError,
    PERMISSION_DENIED: PermissionDeniedError,
    UNAUTHENTICATED: UnauthenticatedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError,
    UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError,
    DATA_LOSS: DataLossError,
}
_EXCEPTION_CLASS_TO_CODE = {cls: code for code, cls in _CODE_TO_EXCEPTION_CLASS.items()}


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """Returns the ``OpError`` subclass for a canonical code.

    Raises:
      KeyError: if ``error_code`` is not a known non-OK code (as TF does).
    """
    return _CODE_TO_EXCEPTION_CLASS[error_code]


def error_code_from_exception_type(cls: type[OpError]) -> int:
    """Returns the canonical code of an ``OpError`` subclass; UNKNOWN for others."""
    return _EXCEPTION_CLASS_TO_CODE.get(cls, UNKNOWN)


class OperatorNotAllowedInGraphError(TypeError):
    """A Python operation on a symbolic Tensor that graph mode cannot do (TF's:
    iterating over a Tensor whose first dimension is not known)."""
