"""The Resource* twins of the ref-updating ops: ResourceApplyAdam, ResourceSparseApply*,
ResourceScatterUpdate, ResourceCountUpTo, ... -- what TF writes for optimizers and
scatters on resource variables.

asyncflow updates a resource variable through the ref op's own kernel, on a `_ResourceAsRef`
view of its handle (ops/resource_variable_ops.py): one kernel per algorithm.  TF's graphs
(a TF 1.x model with `use_resource=True`, a TF 2.x training graph) hold the twins
instead, and asyncflow's GraphDefs are written with them too (`tf_export.py`), so each
twin here has TF's signature -- the ref inputs are `resource` handles, no outputs but
ResourceCountUpTo's, and the Scatter twins' value type is named `dtype` -- and runs the
ref op's kernel on the handles' variables.
"""

from __future__ import annotations

from asyncflow import tensor_shape
from asyncflow.ops import scatter_nd_ops, state_ops, training_ops  # noqa: F401 - their ref ops
from asyncflow.ops.resource_variable_ops import _var
from asyncflow.registry import ANY, INDEX, NUMERIC, NotDifferentiable, get_op_def, register_op

__all__: list[str] = []

# ref op -> its Resource twin (TF's name), for the ops asyncflow has both of.
_APPLY = [
    "ApplyAdadelta", "ApplyAdagrad", "ApplyAdagradDA", "ApplyAdam", "ApplyCenteredRMSProp",
    "ApplyFtrl", "ApplyFtrlV2", "ApplyGradientDescent", "ApplyMomentum",
    "ApplyProximalAdagrad", "ApplyProximalGradientDescent", "ApplyRMSProp",
    "SparseApplyAdadelta", "SparseApplyAdagrad", "SparseApplyAdagradDA",
    "SparseApplyCenteredRMSProp", "SparseApplyFtrl", "SparseApplyFtrlV2",
    "SparseApplyMomentum", "SparseApplyProximalAdagrad", "SparseApplyProximalGradientDescent",
    "SparseApplyRMSProp", "ScatterNdAdd", "ScatterNdSub", "ScatterNdUpdate",
]  # fmt: skip
_SCATTER = ["ScatterAdd", "ScatterDiv", "ScatterMax", "ScatterMin", "ScatterMul",
            "ScatterSub", "ScatterUpdate"]  # fmt: skip
# TF renamed one input of a twin.
_RENAMED = {("SparseApplyProximalGradientDescent", "delta"): "grad"}


def _wrap(fn, ref_positions: frozenset, keep_output: bool):
    """The ref op's kernel `fn`, run on the variables behind the resource handles."""

    async def kernel(ctx, *args):
        args = [_var(ctx, a) if i in ref_positions else a for i, a in enumerate(args)]
        out = await fn(ctx, *args)
        return out if keep_output else None

    return kernel


def _twin(ref_type: str, name: str | None = None) -> None:
    """Register `name` (default "Resource" + ref_type), the twin of `ref_type`."""
    ref = get_op_def(ref_type)
    name = name or "Resource" + ref_type
    refs = frozenset(i for i, a in enumerate(ref.inputs) if a.is_ref)
    inputs = []
    for i, a in enumerate(ref.inputs):
        arg = _RENAMED.get((ref_type, a.name), a.name)
        if i in refs:
            inputs.append(f"{arg}: resource")
        elif a.number_attr:
            inputs.append(f"{arg}: {a.number_attr} * {a.type_attr}")
        else:
            inputs.append(f"{arg}: {a.type_attr or a.fixed_dtype.name}")
    op_def = register_op(name, inputs=inputs, outputs=[], attrs=dict(ref.attrs),
                         shape_fn=lambda op: [], stateful=True)  # fmt: skip
    NotDifferentiable(name)
    handles = tuple(inputs[i].split(":")[0] for i in refs)
    op_def.kernel("CPU", host_memory=handles)(_wrap(ref.kernel_for("CPU").fn, refs, False))
    _gpu_twin(ref, op_def, handles, refs)


def _gpu_twin(ref, op_def, handles: tuple, refs: frozenset) -> None:
    """The ref op's GPU kernel, if it has one, for the twin too: the handles and what
    the ref kernel keeps on the host stay there."""
    gpu = ref.kernel_defs.get("GPU")
    if gpu is None:
        return
    renamed = {a.name: _RENAMED.get((ref.name, a.name), a.name) for a in ref.inputs}
    host = handles + tuple(renamed[n] for n in sorted(gpu.host_memory) if n in renamed)
    op_def.kernel("GPU", host_memory=host)(_wrap(gpu.fn, refs, False))


def _scatter_twin(ref_type: str) -> None:
    ref = get_op_def(ref_type)
    name = "Resource" + ref_type
    numeric = ref_type not in ("ScatterUpdate",)
    op_def = register_op(
        name,
        inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
        outputs=[],
        attrs={"dtype": NUMERIC if numeric else ANY, "Tindices": INDEX},
        shape_fn=lambda op: [],
        stateful=True,
    )
    NotDifferentiable(name)
    op_def.kernel("CPU", host_memory=("resource",))(
        _wrap(ref.kernel_for("CPU").fn, frozenset([0]), False)
    )
    _gpu_twin(ref, op_def, ("resource",), frozenset([0]))


for _t in _APPLY:
    _twin(_t)
for _t in _SCATTER:
    _scatter_twin(_t)

ResourceCountUpTo = register_op(
    "ResourceCountUpTo",
    inputs=["resource: resource"],
    outputs=["output: T"],
    attrs={"T": INDEX, "limit": 0},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)
NotDifferentiable("ResourceCountUpTo")
ResourceCountUpTo.kernel("CPU", host_memory=("resource",))(
    _wrap(get_op_def("CountUpTo").kernel_for("CPU").fn, frozenset([0]), True)
)
