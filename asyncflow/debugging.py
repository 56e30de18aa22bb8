"""`tf.debugging`'s own functions (TF 2.21 compat.v1): assert_shapes, check numerics
and the switches (log device placement, traceback filtering); its other names (assert_equal,
check_numerics, ...) resolve lazily through namespaces.py.

`assert_shapes` checks tensors' shapes against specs of sizes and symbols:

    tf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("N", 1)), (z, (..., "Q"))])

As TF's, a spec entry is an int (that size), a string (a symbol: every dimension with
it has the size its first one has), None (any size), or, first only, `...` or "*" (any
number of leading dimensions; the rest count from the end: dimension -1, -2, ...).  A
scalar tensor reads as shape [1] and an empty spec as (1,), so a spec of one entry
takes rank 0 or 1.  Ranks are checked for all tensors before any size; what the static
shapes decide fails at once (ValueError), the rest fails when the returned op runs
(InvalidArgumentError, TF's data: "Specified explicitly", "Tensor x dimension", 1, ...).
"""

from __future__ import annotations

import contextlib
import os
import traceback

from asyncflow import debug_events as experimental  # tf.debugging.experimental (tfdbg2)
from asyncflow import graph as ops
from asyncflow import placement
from asyncflow.ops import (
    array_ops,
    check_ops,
    control_flow_ordering,
    manip_ops,
    math_ops,
    reduction_ops,
    slicing_ops,
)
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "experimental",
    "assert_shapes",
    "disable_check_numerics",
    "disable_traceback_filtering",
    "enable_check_numerics",
    "enable_traceback_filtering",
    "get_log_device_placement",
    "is_traceback_filtering_enabled",
    "set_log_device_placement",
]

_ELLIPSES = (Ellipsis, "*")


class _Entry:
    """One (tensor, spec) pair: the tensor's name and shapes (static and, when needed,
    dynamic; scalars as [1]) and its spec's dims, indexed from the end after `...`."""

    def __init__(self, x, spec):
        if isinstance(x, SparseTensor):
            self.name, self.static, self.shape = "", x.shape, x.dense_shape
        else:
            x = ops.convert_to_tensor(x)
            self.name, self.static, self.shape = x.name, x.shape, None
            self._x = x
        if not (hasattr(spec, "__iter__") or hasattr(spec, "__getitem__")):
            raise ValueError(
                f"Tensor {self.name}.  Specified shape must be an iterable.  An iterable has "
                f"the attribute `__iter__` or `__getitem__`.  Received specified shape: {spec}"
            )
        dims = list(spec)
        for i, d in enumerate(dims):
            if i > 0 and _is_ellipsis(d):
                raise ValueError(
                    f"Tensor {self.name} specified shape index {i}.  Symbol `...` or `*` for "
                    "a variable number of unspecified dimensions is only allowed as the "
                    "first entry"
                )
        self.open = bool(dims) and _is_ellipsis(dims[0])
        dims = dims[1:] if self.open else dims
        self.dims = dims or [1]
        n = len(self.dims)
        self.indices = list(range(-n, 0)) if self.open else list(range(n))
        self.rank = self.static.ndims
        self.sizes = (
            None if self.rank is None else ([1] if self.rank == 0 else self.static.as_list())
        )

    def dynamic_shape(self):
        if self.shape is None:
            self.shape = array_ops.shape(self._x)
        return self.shape

    def dynamic_size(self, index):
        """Dimension `index` of the shape, a scalar read as [1]."""
        shape = self.dynamic_shape()
        one = ops.convert_to_tensor([1], dtype=shape.dtype)
        start = math_ops.minimum(array_ops.size(shape), 1)
        padded = array_ops.slice(
            manip_ops.concat([one, shape], 0), array_ops.reshape(start, [1]), [-1]
        )
        if index < 0:
            index = math_ops.add(array_ops.size(padded), index)
        return slicing_ops.gather(padded, index)


def _is_ellipsis(d) -> bool:
    return any(d is e or (isinstance(d, str) and d == e) for e in _ELLIPSES)


def _rank_check(entry, prefix, data, summarize):
    """None, or an Assert for a rank known only at run time.

    Raises:
      ValueError: a static rank that does not fit the spec.
    """
    n, rank = len(entry.dims), entry.rank
    if entry.open:
        if n < 2:  # a scalar reads as [1], so one dimension is always there
            return None
        what, ok = f"rank at least {n}", (lambda r: max(r, 1) >= n)
        dynamic = ("Tensor {} must have rank at least", [n])
    elif n == 1:
        what, ok = "rank in (0, 1)", (lambda r: r in (0, 1))
        dynamic = ("Tensor {} must have rank in", [0, 1])
    else:
        what, ok = f"rank {n}", (lambda r: r == n)
        dynamic = ("Tensor {} must have rank", [n])
    if rank is not None:
        if not ok(rank):
            raise ValueError(
                f"{prefix}Tensor {entry.name} must have {what}.  Received rank {rank}, shape "
                f"{entry.static}"
            )
        return None
    actual = array_ops.size(entry.dynamic_shape())
    if entry.open:
        condition = math_ops.greater_equal(math_ops.maximum(actual, 1), n)
    else:
        condition = reduction_ops.reduce_any(
            manip_ops.stack([math_ops.equal(actual, r) for r in dynamic[1]])
        )
    if data is None:
        data = [prefix, dynamic[0].format(entry.name), *dynamic[1], "Received shape: ",
                entry.dynamic_shape()]  # fmt: skip
    return check_ops.Assert(condition, data, summarize=summarize)


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """An op asserting that each tensor of `shapes` (a list of (tensor, spec) pairs, or
    a dict) has its spec's shape (see the module note for specs).

    Returns the op to run (a group of the run-time checks; a no-op when the static shapes
    decided everything).

    Raises:
      ValueError: at build time, a spec not iterable, `...` not first, or a rank or size
        the static shapes already contradict.
      InvalidArgumentError: when the op runs, a rank or size known only then that does
        not fit.
    """
    pairs = list(shapes.items()) if isinstance(shapes, dict) else [tuple(p) for p in shapes]
    prefix = f"{message}.  " if message else ""
    checks = []
    with ops.name_scope(name, "assert_shapes", [shapes, data]):
        entries = [_Entry(x, spec) for x, spec in pairs]
        for entry in entries:
            check = _rank_check(entry, prefix, data, summarize)
            if check is not None:
                checks.append(check)
        with ops.control_dependencies(checks):
            checks += _size_checks(entries, prefix, data, summarize)
    return control_flow_ordering.group(*checks)


def _size_checks(entries, prefix, data, summarize):
    """The run-time size checks; the static ones raise ValueError here."""
    bound = {}  # symbol -> (size: int or Tensor, "Specified by tensor t dimension i")
    checks = []
    for entry in entries:
        for index, dim in zip(entry.indices, entry.dims, strict=True):
            if dim is None:
                continue
            if isinstance(dim, str):
                if dim not in bound:
                    bound[dim] = (
                        _size(entry, index),
                        f"Specified by tensor {entry.name} dimension {index}",
                    )
                    continue
                size, source = bound[dim]
            else:
                size, source = int(dim), "Specified explicitly"
            actual = _size(entry, index)
            if isinstance(size, int) and isinstance(actual, int):
                if size != actual:
                    raise ValueError(
                        f"{prefix}{source}.  Tensor {entry.name} dimension {index} must have "
                        f"size {size}.  Received size {actual}, shape {entry.static}"
                    )
                continue
            what = data
            if what is None:
                what = [prefix, source, f"Tensor {entry.name} dimension", index,
                        "must have size", size, "Received shape: ",
                        entry.dynamic_shape()]  # fmt: skip
            condition = math_ops.equal(actual, size)
            checks.append(check_ops.Assert(condition, what, summarize=summarize))
    return checks


def _size(entry, index):
    """Dimension `index` of the entry: an int when static, else a scalar tensor."""
    if entry.sizes is not None:
        value = entry.sizes[index]
        if value is not None:
            return int(value)
    return entry.dynamic_size(index)


# -- switches ------------------------------------------------------------------------------


def set_log_device_placement(enabled) -> None:
    """Whether sessions made from now on print each op's device when they place a graph
    ("name: (Type): /job:localhost/replica:0/task:0/device:CPU:0" on stderr), as if
    their ConfigProto set log_device_placement (TF 2.21 merges the two so)."""
    placement.LOG_ALL_PLACEMENTS["enabled"] = bool(enabled)


def get_log_device_placement() -> bool:
    """What set_log_device_placement last set (False at start)."""
    return placement.LOG_ALL_PLACEMENTS["enabled"]


# TF's switch trims TF's own frames from the tracebacks of errors its API raises; it
# changes what a traceback shows, never what a program does.  asyncflow shows its frames
# in full either way, and keeps the switch so programs that flip and read it run as in TF.
_TRACEBACK_FILTERING = {"enabled": True}


def is_traceback_filtering_enabled() -> bool:
    """The traceback-filtering switch (True at start, as TF's); see the note above."""
    return _TRACEBACK_FILTERING["enabled"]


def enable_traceback_filtering() -> None:
    """Turns the traceback-filtering switch on (asyncflow's tracebacks stay whole)."""
    _TRACEBACK_FILTERING["enabled"] = True


def disable_traceback_filtering() -> None:
    """Turns the traceback-filtering switch off (asyncflow's tracebacks stay whole)."""
    _TRACEBACK_FILTERING["enabled"] = False


# -- enable_check_numerics ---------------------------------------------------------------
#
# While on, each op apply_op makes gets a CheckNumericsV2 ("<op>/CheckNumericsV2") on
# each floating output, and ops made later, and session fetches, read the checked
# tensor instead (Graph._checked_outputs), as TF 2.21's graph mode does with the tensor
# its builders return.  TF's ops that cannot make a NaN or Inf from finite inputs are
# not checked.  Unlike TF, ref outputs (a VariableV2's) are not checked either: reading
# one through a check would leave Assign without its ref (TF fails building a Variable).

_SAFE_OPS = frozenset(
    """Concat ConcatV2 ExpandDims Fill Identity Maximum Minimum Reshape Slice Squeeze
    StridedSlice Transpose Unpack Enter Exit Merge Switch NextIteration RefEnter RefExit
    RefMerge RefSwitch RefNextIteration CheckNumericsV2""".split()
)
_CHECKING = {"stack_height_limit": 30, "path_length_limit": 50}
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def enable_check_numerics(stack_height_limit=30, path_length_limit=50) -> None:
    """From now on, every floating output of a new op fails its step when it holds a
    NaN or an Inf (see the note above); the error names the op, its inputs and the
    stack that built it (the last `stack_height_limit` frames, paths cut to
    `path_length_limit` characters).  Calling it again only updates the limits.

    Raises (when a checked step runs):
      InvalidArgumentError: "!!! Detected Infinity or NaN in output 0 of graph op "Log"
        ... : Tensor had -Inf values".
    """
    _CHECKING.update(stack_height_limit=stack_height_limit, path_length_limit=path_length_limit)
    if _check_new_op not in ops.OP_CALLBACKS:
        ops.OP_CALLBACKS.append(_check_new_op)


def disable_check_numerics() -> None:
    """Ops made from now on are not checked; those already checked stay so."""
    if _check_new_op in ops.OP_CALLBACKS:
        ops.OP_CALLBACKS.remove(_check_new_op)


def _check_new_op(op) -> None:
    if op.type in _SAFE_OPS:
        return
    outputs = [t for t in op.outputs if t.dtype.is_floating and not t.dtype._is_ref_dtype]
    if not outputs:
        return
    graph = op.graph
    if graph._checked_outputs is None:
        graph._checked_outputs = {}
    # TF names a check in the scope its op's builder opened ("add/CheckNumericsV2"); a
    # constant opens none, so its check is named where it is made.
    scope = contextlib.nullcontext() if op.type == "Const" else graph.name_scope(op.name + "/")
    with graph.as_default(), scope:
        for t in outputs:
            checked = check_ops.check_numerics_v2(
                t, _check_message(op, t.value_index), name="CheckNumericsV2"
            )
            if op.type != "Placeholder":  # (TF's placeholder gives its unchecked tensor)
                graph._checked_outputs[t] = checked


def _check_message(op, index) -> str:
    # The op's inputs as the user built them: a checked input is named by what it checks.
    inputs = [i.op.inputs[0] if i.op.type == "CheckNumericsV2" else i for i in op.inputs]
    out = op.outputs[index]
    text = (
        f"\n\n!!! Detected Infinity or NaN in output {index} of graph op "
        f'"{op.type}" (# of outputs: {len(op.outputs)}) !!!\n'
        f"  dtype: {out.dtype}\n  shape: {out.shape}\n\n"
    )
    if len(inputs) == 1:
        text += f"  Input tensor: {inputs[0]}\n\n"
    elif inputs:
        text += f"  Input tensors ({len(inputs)}):\n"
        text += "".join(f"         {i}: {t}\n" for i, t in enumerate(inputs)) + "\n"
    return text + _creation_stack() + "\n"


def _creation_stack() -> str:
    """The building stack as TF prints it, "->" after the frames of the user's code."""
    frames = traceback.extract_stack()[:-3]  # (not this module's frames)
    limit, width = _CHECKING["stack_height_limit"], _CHECKING["path_length_limit"]
    lines = ['  Stack trace of op\'s creation ("->": inferred user code):\n']
    if len(frames) > limit:
        lines.append(f"    + ... (Omitted {len(frames) - limit} frames)\n")
        frames = frames[-limit:]
    for f in frames:
        path = f.filename if len(f.filename) <= width else "..." + f.filename[-width:]
        mine = os.path.abspath(f.filename).startswith(_PACKAGE_DIR + os.sep)
        lines.append(f"    + {path} (L{f.lineno}) {f.name}\n")
        lines.append("    |   \n" if mine else " -> |   \n")
    return "".join(lines)
