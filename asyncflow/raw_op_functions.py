"""`tf.raw_ops`: every registered op as a keyword-only function, made from its OpDef.

`tf.raw_ops.MatMul(a=x, b=y, transpose_b=True)` builds the op with exactly the inputs
and attrs its registration declares (TF's names); type attrs and list lengths are taken
from the inputs, as TF's generated wrappers do.  An op with no outputs returns its
Operation, one output its Tensor, a single list output a list, several outputs TF's
namedtuple (`tf.raw_ops.Unique(x=...).idx`).  Ops whose names start with "_" are
asyncflow's own (fusions, Send/Recv) and are not listed.  Functions are made when first
read, so ops other modules register later appear too.
"""

from __future__ import annotations

import collections
import re
import types

from asyncflow import dtypes, registry
from asyncflow import graph as ops

__all__: list[str] = []

# TF's raw_ops names where they differ from the OpDef argument names here (TF's api_def
# renames, and inputs named otherwise here; recorded from TF 2.21's raw_ops signatures).
_RENAMES = {
    **{
        op: {"reduction_indices": "axis"}
        for op in ("All", "Any", "EuclideanNorm", "Max", "Mean", "Min", "Prod", "Sum")
    },
    "Atan2": {"x": "y", "y": "x"},
    "Conj": {"x": "input"},
    "DecodeCompressed": {"input": "bytes"},
    "ExpandDims": {"dim": "axis"},
    "Igamma": {"x": "a", "y": "x"},
    "IgammaGradA": {"x": "a", "y": "x"},
    "Igammac": {"x": "a", "y": "x"},
    "NextAfter": {"x": "x1", "y": "x2"},
    "Polygamma": {"x": "a", "y": "x"},
    "Select": {"t": "x", "e": "y"},
    "SparseApplyProximalGradientDescent": {"delta": "grad"},
    "Split": {"split_dim": "axis"},
    "SplitV": {"split_dim": "axis"},
    "Squeeze": {"squeeze_dims": "axis"},
    "Where": {"input": "condition"},
    "Zeta": {"y": "q"},
}
# Ops built here from other inputs than TF's get a builder of their own (below).
_NOT_RAW = frozenset({"OneShotIterator"})

# A word starts at a capital after a small letter, or at a capital before a small one.
_SNAKE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])")


def _snake(op_type: str) -> str:
    """TF's Python name of an op: MatMul -> mat_mul, TopKV2 -> top_kv2, Conv2D -> conv2d."""
    return _SNAKE.sub("_", op_type).lower()


def _make(op_def) -> types.FunctionType:
    op_type = op_def.name
    renames = _RENAMES.get(op_type, {})
    inferred = {a.type_attr for a in op_def.inputs if a.type_attr} | {
        a.number_attr for a in op_def.inputs if a.number_attr
    }
    attrs = [(k, renames.get(k, k)) for k in op_def.attrs if k not in inferred]
    inputs = [(a.name, renames.get(a.name, a.name)) for a in op_def.inputs]
    keys = [key for _, key in inputs] + [key for _, key in attrs] + ["name"]
    fn_name = _snake(op_type)
    single_list = len(op_def.outputs) == 1 and (
        op_def.outputs[0].number_attr
        or (op_def.outputs[0].type_attr and op_def.attrs[op_def.outputs[0].type_attr].is_list)
    )

    def raw_op(*args, **kwargs):
        if args:
            raise TypeError(
                f"{fn_name} only takes keyword args (possible keys: {keys}). Please pass "
                "these args as kwargs instead."
            )
        unknown = [k for k in kwargs if k not in keys]
        if unknown:
            raise TypeError(f"{fn_name}() got an unexpected keyword argument '{unknown[0]}'")
        name = kwargs.pop("name", None)
        values = []
        for _, key in inputs:
            if key not in kwargs:
                raise TypeError(f"{fn_name}() missing 1 required positional argument: '{key}'")
            values.append(kwargs.pop(key))
        given = {}
        for k, key in attrs:
            if key in kwargs:
                value = kwargs.pop(key)
                constraint = op_def.attrs[k]
                if isinstance(constraint, registry.TypeConstraint):
                    if constraint.is_list:  # (list(type) attrs given as lists)
                        value = [dtypes.as_dtype(v) for v in value]
                    else:
                        value = dtypes.as_dtype(value)
                given[k] = value
            elif op_def.attrs[k] is registry.REQUIRED:
                raise TypeError(f"{fn_name}() missing 1 required positional argument: '{key}'")
        op = ops.apply_op(op_type, values, given, name=name)
        if not op_def.outputs:
            return op
        if single_list:
            return list(op.outputs)
        if len(op_def.outputs) == 1:
            return op.outputs[0]
        return registry.named_outputs(op)

    raw_op.__name__ = raw_op.__qualname__ = op_type
    raw_op.__doc__ = f"TF's raw op {op_type}: keyword arguments {keys}."
    return raw_op


# TF's ref control-flow types: asyncflow builds their plain twins, whose outputs stay
# references when the input is one (graph export writes the Ref* type back, and import
# reads it as the twin).
_REF_TWINS = {
    "RefEnter": "Enter",
    "RefExit": "Exit",
    "RefNextIteration": "NextIteration",
    "RefSwitch": "Switch",
    "RefMerge": "Merge",
}


def _make_ref_twin(op_type: str) -> types.FunctionType:
    plain = _make(registry.get_op_def(_REF_TWINS[op_type]))
    arg = "inputs" if op_type == "RefMerge" else "data"

    def raw_op(*args, **kwargs):
        value = kwargs.get(arg)
        given = value if isinstance(value, list | tuple) else [value]
        if not args and not all(getattr(t, "_is_ref", False) for t in given):
            raise TypeError(
                f"'{op_type}' Op requires that input '{arg}' be a mutable tensor (e.g.: a "
                "tf.Variable)"
            )
        kwargs["name"] = kwargs.get("name") or op_type
        out = plain(*args, **kwargs)
        op = (out[0] if isinstance(out, tuple) else out).op
        for t in op.outputs[:1] if op_type == "RefMerge" else op.outputs:
            t._is_ref = True  # (a reference passes on: the Ref* type when exported)
        if isinstance(out, tuple) and hasattr(out, "_fields"):  # (TF's namedtuple name)
            out = collections.namedtuple(op_type, out._fields)(*out)
        return out

    raw_op.__name__ = raw_op.__qualname__ = op_type
    raw_op.__doc__ = f"TF's raw op {op_type}: {_REF_TWINS[op_type]} of a reference."
    return raw_op


def OneShotIterator(  # noqa: N802 - TF's raw-op name
    *,
    dataset_factory,
    output_types,
    output_shapes,
    container: str = "",
    shared_name: str = "",
    name=None,
):
    """TF's raw op OneShotIterator: `dataset_factory` (a traced function of no arguments,
    or any callable) makes the dataset; its body is built into this graph and the
    iterator takes the dataset it makes as its input, as asyncflow's OneShotIterator
    does (TF's kernel runs the factory once, as the iterator is created; so does this
    one, which reads its input only then)."""
    made = dataset_factory()
    if isinstance(made, list | tuple):
        if len(made) != 1:
            raise ValueError(
                f"The dataset_factory of a OneShotIterator returns one dataset, not {len(made)}"
            )
        made = made[0]
    dataset = getattr(made, "_variant", made)  # (a Dataset, or its handle tensor)
    attrs = {
        "output_types": [dtypes.as_dtype(t) for t in output_types],
        "output_shapes": list(output_shapes),
        "container": container,
        "shared_name": shared_name,
    }
    return ops.apply_op("OneShotIterator", [dataset], attrs, name=name).outputs[0]


# (asyncflow/raw_ops_functional.py adds If, While, PartitionedCall and the like)
_BUILDERS = {"OneShotIterator": OneShotIterator}


def register_builder(op_type: str, builder) -> None:
    """`tf.raw_ops.<op_type>` is `builder` (keyword-only, TF's arguments): for ops whose
    graph form here differs from their OpDef's arguments (a function attr traced into
    the graph)."""
    _BUILDERS[op_type] = builder


class _RawOps(types.ModuleType):
    """The `tf.raw_ops` namespace (see the module note)."""

    def __getattr__(self, attr: str):
        if attr in _REF_TWINS:
            fn = _make_ref_twin(attr)
            setattr(self, attr, fn)
            return fn
        if attr in _BUILDERS:
            setattr(self, attr, _BUILDERS[attr])
            return _BUILDERS[attr]
        op_def = None
        if not attr.startswith("_") and attr not in _NOT_RAW:
            op_def = registry.all_op_defs().get(attr)
        if op_def is None:
            raise AttributeError(f"module 'asyncflow.raw_ops' has no attribute '{attr}'")
        fn = _make(op_def)
        setattr(self, attr, fn)
        return fn

    def __dir__(self):
        names = [
            n
            for n in registry.all_op_defs()
            if not n.startswith("_") and (n not in _NOT_RAW or n in _BUILDERS)
        ]
        return sorted(set(names + list(_REF_TWINS) + list(_BUILDERS)))


raw_ops = _RawOps("asyncflow.raw_ops", "TF's tf.raw_ops: every op as a keyword-only function.")
