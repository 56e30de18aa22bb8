"""What a one-shot iterator's dataset may capture: TF's `make_one_shot_iterator` copies
the ops building the dataset, by value, into the iterator's `dataset_factory` (a
function of no arguments), and refuses the dataset if one of them is stateful or a
placeholder.  asyncflow's OneShotIterator takes the dataset as its input instead
(asyncflow/master.py runs those ops once per session), so it checks the same ops as the
iterator is made, and raises TF's ValueError before adding anything to the graph.

The ops checked are those the dataset's op reaches through data inputs: a dataset's
own ops and the values its functions capture (a `map` function's body is not checked,
so a variable or a random op used inside it is allowed; a control input is not
followed).  The first op refused, depth first from the dataset's op in input order, is
the one named, as TF names it.  Ops producing a dataset are allowed, stateful or not
(TF allows every op whose first output is a DT_VARIANT).  asyncflow traces a dataset
function's ops into the dataset's own graph: they are told from the values the function
captures by the op ids its trace made (`note_traced`, called by data/dataset.py's
tracer) and by their depending on the function's arguments.

"Stateful" is TF's op flag, not asyncflow's registry's: the registry also marks ops
that update a ref input, or use a handle another op made (a queue's, a TensorArray's),
so that they are never pruned, merged or folded; TF marks only the op making the
object stateful there, and the copy reaches that op through the same input.

Invariant: the check reads the graph and the spans noted for it only.  (A graph built
by two threads at once may have another thread's ops inside a trace's span: they go
unchecked, as TF's Graph is not thread-safe for building either.)
"""

from __future__ import annotations

import re
import weakref

__all__ = ["check_capturable", "note_traced", "refused_type"]

# Ops asyncflow's registry marks stateful that TF's copy lets through: TF does not
# mark them stateful (the op making their handle is), or their result is a variant.
_NOT_STATEFUL_IN_TF = frozenset(
    {
        "AccumulatorNumAccumulated",
        "AccumulatorSetGlobalStep",
        "BarrierClose",
        "BarrierIncompleteSize",
        "BarrierInsertMany",
        "BarrierReadySize",
        "BarrierTakeMany",
        "Batch",
        "BatchFunction",
        "CompressElement",
        "DatasetCardinality",
        "DatasetFingerprint",
        "DatasetFromGraph",
        "DatasetToGraph",
        "DatasetToGraphV2",
        "ExperimentalDatasetCardinality",
        "FractionalAvgPool",
        "FractionalMaxPool",
        "GetElementAtIndex",
        "IteratorGetNextAsOptional",
        "MutexLock",
        "SerializeIterator",
        "SnapshotDatasetReader",
        "SparseAccumulatorApplyGradient",
        "SparseAccumulatorTakeGradient",
        "StackClose",
        "StackPop",
        "StackPush",
        "TensorArrayCloseV2",
        "TensorArrayConcatV2",
        "TensorArrayGatherV2",
        "TensorArrayReadV2",
        "TensorArrayScatterV2",
        "TensorArraySizeV2",
        "TensorArraySplitV2",
        "TensorArrayWriteV2",
        "Unbatch",
        "UnbatchGrad",
        "UncompressElement",
        "UnwrapDatasetVariant",
        "WindowOp",
        "WrapDatasetVariant",
    }
)
# Ops TF marks stateful that asyncflow's registry does not (its result is not a variant).
_STATEFUL_IN_TF = frozenset(
    {
        "CheckNumerics",
        "CheckNumericsV2",
        "GuaranteeConst",
        "InitializeTableFromDataset",
        "ReduceDataset",
        "SaveDataset",
    }
)
# Stateful ops TF's one-shot iterator copies anyway: the tf.data service's counter.
_ALLOWED = frozenset({"DummyIterationCounter"})
_MAKES_DATASET = re.compile(r"Datasets?(V\d+)?$|DatasetReader$")
_PLACEHOLDERS = ("Placeholder", "PlaceholderV2")
# graph -> [(first, last)]: the op ids each dataset function's trace made (note_traced).
_traced_spans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def refused_type(op_def) -> bool:
    """Whether TF's copy by value refuses an op of this OpDef (stateful, its result not
    a dataset, nor one TF allows by name)."""
    name = op_def.name
    if name in _STATEFUL_IN_TF:
        return True
    if not op_def.stateful or name in _NOT_STATEFUL_IN_TF or name in _ALLOWED:
        return False
    return not _MAKES_DATASET.search(name) and not any(arg.is_ref for arg in op_def.inputs)


def note_traced(graph, first_id: int) -> None:
    """Remember that the ops `graph` made after op id `first_id` (`graph.version` as the
    trace began) up to now were made tracing a dataset function: the function's own ops,
    which TF's factory takes with the function, unchecked."""
    _traced_spans.setdefault(graph, []).append((first_id, graph.version))


def _traced(op, spans) -> bool:
    """Whether `op` is a traced function's own: made in a trace, and not one TF makes
    outside the function (`_lifted`: a queue class's, a StaticHashTable's)."""
    if getattr(op, "_lifted", False):
        return False
    return any(first < op._id <= last for first, last in spans)


def _functions(op, inside: set) -> list:
    """The ops of the results of `op`'s traced functions (its `<prefix>_outputs` attrs);
    adds their own ops to `inside`: their arguments (`<prefix>_inputs`) and the ops
    that depend on those (a function made outside a trace, by a raw op's attrs)."""
    g = op.graph

    def get(n: str):  # (a name without ":" names an op: a function's control outputs)
        return g.get_tensor_by_name(n).op if ":" in n else g.get_operation_by_name(n)

    results, args = [], set()
    for key, names in op._attrs.items():
        if not isinstance(names, list | tuple) or not key.endswith(("_outputs", "_inputs")):
            continue
        try:
            ops_ = [get(n) for n in names if isinstance(n, str)]
        except (KeyError, ValueError):  # (not tensor names of this graph: no function)
            continue
        if key.endswith("_outputs"):
            results.extend(ops_)
        else:
            args.update(ops_)
    if args:
        inside |= args
        cone, stack = set(), list(results)
        while stack:
            o = stack.pop()
            if o not in cone and o not in args:
                cone.add(o)
                stack.extend(t.op for t in o.inputs)
        for o in sorted(cone, key=lambda o: o._id):  # (ids: an op's inputs come first)
            if any(t.op in inside for t in o.inputs):
                inside.add(o)
    return results


def check_capturable(dataset_op) -> None:
    """Raise TF's ValueError if a one-shot iterator cannot take the dataset made by
    `dataset_op` (the module note).

    Raises:
      ValueError: an op the dataset captures is stateful (a variable, a lookup table,
        a random op, a stateful py_func, ...) or a placeholder.
    """
    spans = _traced_spans.get(dataset_op.graph, ())
    seen, inside = set(), set()
    stack = [dataset_op]
    while stack:
        op = stack.pop()
        if op in seen:  # (checked with all it reads)
            continue
        seen.add(op)
        traced = op in inside or _traced(op, spans)
        if not traced:
            _check(op)
        # (depth first in TF's order: the op's inputs, then what its functions capture;
        # in a function, its control inputs too: its control outputs' ops capture theirs)
        nxt = [t.op for t in op.inputs] + _functions(op, inside)
        if traced:
            nxt[len(op.inputs) : len(op.inputs)] = op.control_inputs
        stack.extend(reversed(nxt))


def _check(op) -> None:
    if refused_type(op.op_def):
        raise ValueError(
            f"Cannot capture a stateful node (name:{op.name}, type:{op.type}) by "
            "value.: A likely cause of this error is that the dataset for which you "
            "are calling `make_one_shot_iterator()` captures a stateful object, such "
            "as a `tf.Variable` or `tf.lookup.StaticHashTable`, which is not "
            "supported. Use `make_initializable_iterator()` instead."
        )
    if op.type in _PLACEHOLDERS:
        raise ValueError(
            f"Cannot capture a placeholder (name:{op.name}, type:{op.type}) by value."
        )
