"""The tf.data service's graph ops: RegisterDataset(V2) and DataServiceDataset(V1..V4),
with TF 2.21's signatures (DummyIterationCounter is in dataset_raw_iterators.py).

What the kernels do needs the wire protocol and a session (the client layer), which ops
may not import: `asyncflow.data.service` sets `CLIENT`, an object with
`register(ctx, address, protocol)` (async: the dataset id, as TF's RegisterDataset
kernel registers its input's graph with the dispatcher at run time) and
`dataset(ctx, args)` (a `DatasetValue` that reads from the service).  Without it (the
package not imported) the kernels raise UnimplementedError.

Invariant: a DataServiceDataset kernel only binds its arguments (processing mode,
address, job, consumer) into a value; nothing connects until a pass over it starts.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops.dataset_ops import _OUT, _handle, _handle_shape
from asyncflow.registry import NotDifferentiable, get_op_def, register_op

__all__: list[str] = []

# Set by asyncflow.data.service (see the module note).
CLIENT = None


def _client():
    if CLIENT is None:
        raise errors.UnimplementedError(
            None, None, "The tf.data service needs asyncflow.data.service imported"
        )
    return CLIENT


def _scalar(op):
    return [tensor_shape.TensorShape([])]


_REGISTER_ATTRS = {"external_state_policy": 0, "element_spec": "", "metadata": ""}
for _name, _out, _extra in (
    ("RegisterDataset", "int64", {}),
    ("RegisterDatasetV2", "string", {"requested_dataset_id": ""}),
):
    _op = register_op(
        _name,
        inputs=["dataset: string", "address: string", "protocol: string"],
        outputs=[f"dataset_id: {_out}"],
        attrs={**_REGISTER_ATTRS, **_extra},
        shape_fn=_scalar,
        stateful=True,  # (TF's is not, but registering twice must register twice here)
    )
    NotDifferentiable(_name)

    @_op.kernel("CPU")
    async def _register_kernel(ctx, dataset, address, protocol):
        dataset_id = await _client().register(ctx, address, protocol)
        if ctx.op.type == "RegisterDataset":
            try:
                return np.array(int(dataset_id), np.int64)
            except ValueError:
                raise errors.InvalidArgumentError(
                    None, None, f"Dataset id {dataset_id!r} is not an integer"
                ) from None
        return np.array(dataset_id.encode(), dtype=object)


_DATA_SERVICE_ATTRS = {
    **_OUT,
    "task_refresh_interval_hint_ms": -1,
    "data_transfer_protocol": "",
    "target_workers": "AUTO",
    "cross_trainer_cache_options": "",
}
_COMPRESSED = {"uncompress": False, "uncompress_fn": ""}
for _name, _id, _consumers, _extra in (
    ("DataServiceDataset", "int64", False, {}),
    ("DataServiceDatasetV2", "int64", True, {}),
    ("DataServiceDatasetV3", "int64", True, _COMPRESSED),
    ("DataServiceDatasetV4", "string", True, _COMPRESSED),
):
    _inputs = [
        f"dataset_id: {_id}",
        "processing_mode: string",
        "address: string",
        "protocol: string",
        "job_name: string",
    ]
    if _consumers:
        _inputs += ["consumer_index: int64", "num_consumers: int64"]
    _inputs += ["max_outstanding_requests: int64", "iteration_counter: resource"]
    _op = register_op(
        _name,
        inputs=_inputs,
        outputs=["handle: string"],
        attrs={**_DATA_SERVICE_ATTRS, **_extra},
        shape_fn=_handle_shape,
        stateful=True,
    )
    NotDifferentiable(_name)

    @_op.kernel("CPU")
    async def _data_service_kernel(ctx, *args):
        names = [a.name for a in get_op_def(ctx.op.type).inputs]
        return _handle(_client().dataset(ctx, dict(zip(names, args, strict=True))))
