"""The graph-building functions of `tf.data.experimental.service`: `distribute`,
`register_dataset`, `from_dataset_id` and `CrossTrainerCache`, with TF 2.21's
arguments, defaults and build-time errors.

They add TF's ops (RegisterDatasetV2, DummyIterationCounter, DataServiceDatasetV4), so
a graph built here reads as TF's: the dataset is registered when the session first
runs the register op, and each pass over the distributed dataset is one read of a job.

`compression="AUTO"` (or "SNAPPY") has the workers send elements snappy-compressed
(imagecodecs' snappy), None raw, as TF's.

`target_workers="LOCAL"` reads only the workers running in this process (TF's rule,
client.py); "AUTO" and "ANY" read every worker.

Differences from TF: `data_transfer_protocol` is accepted and every worker, a local
one too, is read over the wire; a `cross_trainer_cache` is refused
(UnimplementedError); a coordinated read (`num_consumers` given, 0 too) without a
non-negative `consumer_index` fails with InvalidArgumentError where TF's process
aborts.
"""

from __future__ import annotations

from asyncflow import dtypes, nest
from asyncflow import graph as ops
from asyncflow.data.dataset import Dataset
from asyncflow.data.service.client import metadata, mode_def
from asyncflow.data.service.protocol import ShardingPolicy
from asyncflow.data.structure import _component_attrs, _Spec
from asyncflow.errors import UnimplementedError
from asyncflow.ops import dataset_ops, string_ops

__all__ = ["CrossTrainerCache", "distribute", "from_dataset_id", "register_dataset"]

_COMPRESSIONS = ["AUTO", None, "SNAPPY"]


class CrossTrainerCache:
    """TF's option to share a job's elements between trainers (`trainer_id` names this
    one).  Raises ValueError for an empty or non-string id; reading with one is not
    supported here (UnimplementedError from `distribute`)."""

    def __init__(self, trainer_id):
        if not trainer_id:
            raise ValueError(
                "tf.data service cross-trainer cache requires a non-empty trainer ID."
            )
        self.trainer_id = trainer_id


def _policy(processing_mode) -> ShardingPolicy:
    if isinstance(processing_mode, ShardingPolicy):
        return processing_mode
    if processing_mode == "parallel_epochs":
        return ShardingPolicy.OFF
    if processing_mode == "distributed_epoch":
        return ShardingPolicy.DYNAMIC
    raise ValueError(
        "tf.data service processing mode should be a "
        '`tf.data.experimental.service.ShardingPolicy`, `"parallel_epochs"`, or '
        f'`"distributed_epoch"`. Got {processing_mode!r}.'
    )


def _check_string(value, name: str) -> None:
    if not isinstance(value, str):
        raise ValueError(
            f"`{name}` must be a string, but `{name}` was of type {type(value)}. {name}={value}"
        )
    if not value:
        raise ValueError(f"`{name}` must not be empty")


def _split_service(service) -> tuple[str, str]:
    """(protocol, address) of "protocol://address" (TF's default protocol: grpc)."""
    _check_string(service, "service")
    protocol, sep, address = service.partition("://")
    return (protocol, address) if sep else ("grpc", service)


def _check_compression(compression) -> None:
    if compression not in _COMPRESSIONS:
        raise ValueError(
            f"Invalid `compression` argument: {compression}. Must be one of {_COMPRESSIONS}."
        )


def register_dataset(service, dataset, compression="AUTO", dataset_id=None):
    """Register `dataset` with the dispatcher at `service` when the session runs the
    result: a string scalar tensor, the dataset's id (TF's RegisterDatasetV2).

    Raises:
      ValueError: for a service that is not a non-empty string or a bad compression.
    Running the result raises InvalidArgumentError for a dataset that depends on a
    placeholder, UnavailableError when the dispatcher cannot be reached.
    """
    protocol, address = _split_service(service)
    _check_compression(compression)
    with ops.name_scope(None):
        return ops.apply_op(
            "RegisterDatasetV2",
            [
                dataset._variant,
                ops.convert_to_tensor(address, dtypes.string, name="RegisterDatasetV2/address"),
                ops.convert_to_tensor(protocol, dtypes.string, name="RegisterDatasetV2/protocol"),
            ],
            {
                "external_state_policy": 2,
                "requested_dataset_id": dataset_id or "",
                "metadata": metadata(compression),
            },
            name="RegisterDatasetV2",
        ).outputs[0]


def _structure_of(element_spec):
    def spec(s):
        if type(s).__name__ != "TensorSpec":
            raise UnimplementedError(
                None, None, f"asyncflow's tf.data service reads dense components only, not {s!r}"
            )
        return _Spec(s.dtype, s.shape)

    return nest.map_structure(spec, element_spec)


def _int64(v, name):
    return ops.convert_to_tensor(-1 if v is None else v, dtypes.int64, name=name)


def from_dataset_id(
    processing_mode,
    service,
    dataset_id,
    element_spec=None,
    job_name=None,
    consumer_index=None,
    num_consumers=None,
    max_outstanding_requests=None,
    data_transfer_protocol=None,
    cross_trainer_cache=None,
    target_workers="AUTO",
):
    """A dataset reading the registered dataset `dataset_id` from the service.

    A `job_name` is the job's within `dataset_id` (the job's name is
    "dataset_id=/<id>/<job_name>", as TF's): another dataset id under the same name
    reads another job.

    Raises:
      ValueError: for an unknown processing mode, a service or job name that is not a
        non-empty string, `num_consumers` without `job_name`, or no `element_spec`
        (graph mode: it cannot be asked of the dispatcher while building).
      UnimplementedError: for a `cross_trainer_cache`.
    """
    policy = _policy(processing_mode)
    protocol, address = _split_service(service)
    _check_read(job_name, num_consumers, cross_trainer_cache, element_spec)
    if job_name is not None:
        with ops.name_scope(None):
            job_name = string_ops.string_join(
                ["dataset_id=", _string(dataset_id), job_name], "/", name="job_name_join"
            )
    reads = (consumer_index, num_consumers, max_outstanding_requests)
    return _from_dataset_id(
        policy, (protocol, address), dataset_id, element_spec, job_name, reads,
        data_transfer_protocol, target_workers,
    )  # fmt: skip


def _string(dataset_id):
    """`dataset_id` as a string tensor (an int64 one written in decimal, as TF's)."""
    t = ops.convert_to_tensor(dataset_id)
    if t.dtype == dtypes.string:
        return t
    return string_ops.as_string(t)


def _from_dataset_id(
    policy, service, dataset_id, element_spec, job_name, reads, data_transfer_protocol,
    target_workers,
):  # fmt: skip
    """`from_dataset_id` with `job_name` (a string or string tensor) the job's name as
    it is: `distribute`'s reads are keyed by the name alone (TF's).  `reads`:
    (consumer_index, num_consumers, max_outstanding_requests), checked by `_check_read`
    (as is the cross-trainer cache, which no read takes here)."""
    protocol, address = service
    consumer_index, num_consumers, max_outstanding_requests = reads
    structure = element_spec if _is_structure(element_spec) else _structure_of(element_spec)
    with ops.name_scope(None):
        counter = ops.apply_op("DummyIterationCounter", [], {}, name="DummyIterationCounter")
        inputs = [
            ops.convert_to_tensor(dataset_id, dtypes.string, name="dataset_id"),
            ops.convert_to_tensor(mode_def(policy), dtypes.string, name="processing_mode"),
            ops.convert_to_tensor(address, dtypes.string, name="address"),
            ops.convert_to_tensor(protocol, dtypes.string, name="protocol"),
            ops.convert_to_tensor(
                "" if job_name is None else job_name, dtypes.string, name="job_name"
            ),
            _int64(consumer_index, "consumer_index"),
            _int64(num_consumers, "num_consumers"),
            _int64(max_outstanding_requests, "max_outstanding_requests"),
            counter.outputs[0],
        ]
        attrs = {
            **_component_attrs(structure),
            "data_transfer_protocol": data_transfer_protocol or "",
            "target_workers": str(target_workers),
        }
        ds = Dataset(None, structure)
        ds._variant = dataset_ops.dataset_op("DataServiceDatasetV4", inputs, attrs)
    return ds


def _check_read(job_name, num_consumers, cross_trainer_cache, element_spec) -> None:
    if job_name is not None:
        _check_string(job_name, "job_name")
    if num_consumers is not None and job_name is None:
        raise ValueError(
            "`job_name` must be set when setting `num_consumers`. "
            f"num_consumers was set to {num_consumers}."
        )
    if cross_trainer_cache is not None:
        raise UnimplementedError(
            None, None, "asyncflow's tf.data service has no cross-trainer cache"
        )
    if element_spec is None:
        raise ValueError("In graph mode `element_spec` must be provided manually.")


def _is_structure(value) -> bool:
    return all(isinstance(s, _Spec) for s in nest.flatten(value))


def distribute(
    processing_mode,
    service,
    job_name=None,
    consumer_index=None,
    num_consumers=None,
    max_outstanding_requests=None,
    data_transfer_protocol=None,
    compression="AUTO",
    cross_trainer_cache=None,
    target_workers="AUTO",
):
    """A transformation (for `Dataset.apply`) that reads the dataset from the service:
    registered with the dispatcher at `service`, produced by its workers.

    `processing_mode`: a ShardingPolicy, "parallel_epochs" (OFF: every worker
    produces the whole dataset) or "distributed_epoch" (DYNAMIC: each element once
    overall).  Consumers that give the same `job_name` share one job, whatever
    their dataset (the name alone is the job's key, as TF's: a `distribute` whose
    register op runs again, as an iterator initialized again, joins the job it read
    before); with `num_consumers`, each reads its `consumer_index`'s element of every
    round.

    Raises ValueError for the arguments `from_dataset_id` refuses or a bad compression.
    """
    policy = _policy(processing_mode)
    split = _split_service(service)
    _check_compression(compression)

    def _apply(dataset):
        _check_read(job_name, num_consumers, cross_trainer_cache, dataset._structure)
        dataset_id = register_dataset(service, dataset, compression=compression)
        reads = (consumer_index, num_consumers, max_outstanding_requests)
        return _from_dataset_id(
            policy, split, dataset_id, dataset._structure, job_name, reads,
            data_transfer_protocol, target_workers,
        )  # fmt: skip

    return _apply
