"""TF Serving's SavedModel warm-up: replay `assets.extra/tf_serving_warmup_requests`.

The file is a TFRecord file of PredictionLog records (asyncflow.protos.serving.
prediction_log), written by any TFRecord writer.  At load, before the version serves,
each record's request is run against it, so its first real requests find their plans
compiled.  As TF Serving does (servables/tensorflow/saved_model_warmup*.cc):

- no file: nothing to replay (the load goes on);
- Predict, Classify, Regress and MultiInference logs are replayed, their model name and
  version ignored (they run on the version being loaded); a SessionRunLog is
  UNIMPLEMENTED; any other kind is skipped;
- each record runs `num_request_iterations` times (1);
- the load fails, and the version is reported with the error, when a request fails,
  a record does not parse as a PredictionLog, there are more than 1000 records, or the
  file is not a TFRecord file (DataLossError).
"""

from __future__ import annotations

import asyncio
import logging
import os

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from asyncflow import errors
from asyncflow.protos.serving import prediction_log_pb2

__all__ = ["WARMUP_FILE", "MAX_RECORDS", "warmup_path", "read_warmup_records", "arun_warmup"]

_log = logging.getLogger("asyncflow.serving")

# TF Serving's names: tensorflow/cc/saved_model/constants.h, saved_model_warmup_util.h.
ASSETS_EXTRA = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000
_SESSION_RUN_LOG = 5  # PredictionLog.session_run_log's field number (not modelled)


def warmup_path(export_dir: str) -> str:
    return os.path.join(export_dir, ASSETS_EXTRA, WARMUP_FILE)


def read_warmup_records(export_dir: str) -> list[prediction_log_pb2.PredictionLog]:
    """The warm-up file's records, parsed (blocking); [] when there is no file.

    Raises:
      InvalidArgumentError: a record is no PredictionLog, or there are too many.
      DataLossError: the file is not a (sound) TFRecord file.
    """
    from asyncflow.python_io import tf_record_iterator

    path = warmup_path(export_dir)
    if not os.path.exists(path):
        return []
    logs = []
    try:
        for record in tf_record_iterator(path):
            if len(logs) == MAX_RECORDS:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Number of warmup records exceeds the maximum ({MAX_RECORDS}) at {path}",
                )
            try:
                logs.append(prediction_log_pb2.PredictionLog.FromString(record))
            except DecodeError:
                raise errors.InvalidArgumentError(
                    None, None, f"Failed to parse warmup record: {record[:64]!r} from {path}"
                ) from None
    except errors.DataLossError as e:
        raise errors.DataLossError(
            None, None, f"{e.message}. Please verify your warmup data is in TFRecord format."
        ) from None
    return logs


async def arun_warmup(model, version: int | None, export_dir: str, iterations: int = 1) -> int:
    """Replay `export_dir`'s warm-up file against `model` (a ServableModel); the number
    of records replayed.  Raises the first failure (see the module's note)."""
    from asyncflow.serving.grpc_server import Inference

    logs = await asyncio.to_thread(read_warmup_records, export_dir)
    if not logs:
        return 0
    inference = Inference()
    calls = {
        "predict_log": inference.predict,
        "classify_log": inference.classify,
        "regress_log": inference.regress,
        "multi_inference_log": inference.multi_inference,
    }
    for log in logs:
        kind = log.WhichOneof("log_type")
        call = calls.get(kind)
        if call is None:
            if any(f.field_number == _SESSION_RUN_LOG for f in UnknownFieldSet(log)):
                raise errors.UnimplementedError(
                    None, None, f"Unsupported log_type for warmup: {_SESSION_RUN_LOG}"
                )
            continue
        request = getattr(log, kind).request
        for _ in range(iterations):
            await call(model, version, request)
    _log.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d.",
        warmup_path(export_dir),
        len(logs),
    )
    return len(logs)
