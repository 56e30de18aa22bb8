"""Compare asyncflow's .proto messages with TensorFlow's: names, numbers, types, labels.

Run with an interpreter that has TensorFlow and asyncflow importable, e.g.
  PYTHONPATH=. /work/tfvenv/bin/python tools/compare_protos_with_tf.py
Prints every difference and exits 1 when there is one.  asyncflow's messages live in the
package "asyncflow.tensorflow" (so both sets load in one process); only the short names,
field names, numbers, types and labels must agree, and a field TF has that asyncflow
leaves out must be listed in ALLOWED_MISSING (protobuf keeps such fields as unknown ones).
"""

import importlib
import os
import sys
import types


def _protos_without_the_package():
    """Import asyncflow.protos without asyncflow/__init__ (TF's interpreter lacks numpy's
    companions asyncflow needs, and only the generated modules matter here)."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "asyncflow")
    pkg = types.ModuleType("asyncflow")
    pkg.__path__ = [root]
    sys.modules.setdefault("asyncflow", pkg)


PAIRS = {
    "types": "tensorflow.core.framework.types_pb2",
    "full_type": "tensorflow.core.framework.full_type_pb2",
    "tensor_shape": "tensorflow.core.framework.tensor_shape_pb2",
    "resource_handle": "tensorflow.core.framework.resource_handle_pb2",
    "tensor": "tensorflow.core.framework.tensor_pb2",
    "attr_value": "tensorflow.core.framework.attr_value_pb2",
    "node_def": "tensorflow.core.framework.node_def_pb2",
    "op_def": "tensorflow.core.framework.op_def_pb2",
    "function": "tensorflow.core.framework.function_pb2",
    "versions": "tensorflow.core.framework.versions_pb2",
    "graph": "tensorflow.core.framework.graph_pb2",
    "saver": "tensorflow.core.protobuf.saver_pb2",
    "variable": "tensorflow.core.framework.variable_pb2",
    "queue_runner": "tensorflow.core.protobuf.queue_runner_pb2",
    "meta_graph": "tensorflow.core.protobuf.meta_graph_pb2",
    "control_flow": "tensorflow.core.protobuf.control_flow_pb2",
    "saved_model": "tensorflow.core.protobuf.saved_model_pb2",
    "fingerprint": "tensorflow.core.protobuf.fingerprint_pb2",
    "tensor_slice": "tensorflow.core.framework.tensor_slice_pb2",
    "tensor_bundle": "tensorflow.core.protobuf.tensor_bundle_pb2",
    "checkpoint_state": "tensorflow.python.training.checkpoint_state_pb2",
    "trackable_object_graph": "tensorflow.core.protobuf.trackable_object_graph_pb2",
    "saved_object_graph": "tensorflow.core.protobuf.saved_object_graph_pb2",
    "cluster": "tensorflow.core.protobuf.cluster_pb2",
    "tensorflow_server": "tensorflow.core.protobuf.tensorflow_server_pb2",
    "feature": "tensorflow.core.example.feature_pb2",
    "example": "tensorflow.core.example.example_pb2",
    "summary": "tensorflow.core.framework.summary_pb2",
    "event": "tensorflow.core.util.event_pb2",
    "allocation_description": "tensorflow.core.framework.allocation_description_pb2",
    "tensor_description": "tensorflow.core.framework.tensor_description_pb2",
    "step_stats": "tensorflow.core.framework.step_stats_pb2",
    "cost_graph": "tensorflow.core.framework.cost_graph_pb2",
    "config": "tensorflow.core.protobuf.config_pb2",
    "debug": "tensorflow.core.protobuf.debug_pb2",
    "graph_debug_info": "tensorflow.core.framework.graph_debug_info_pb2",
    "debug_event": "tensorflow.core.protobuf.debug_event_pb2",
    "tfprof_log": "tensorflow.core.profiler.tfprof_log_pb2",
    "tfprof_output": "tensorflow.core.profiler.tfprof_output_pb2",
    "quantization_config": (
        "tensorflow.compiler.mlir.quantization.stablehlo.quantization_config_pb2"
    ),
    "quantization_options": (
        "tensorflow.compiler.mlir.quantization.tensorflow.quantization_options_pb2"
    ),
    # TF Serving's API (pip install tensorflow-serving-api --no-deps beside TensorFlow)
    "serving.model": "tensorflow_serving.apis.model_pb2",
    "serving.status": "tensorflow_serving.apis.status_pb2",
    "serving.input": "tensorflow_serving.apis.input_pb2",
    "serving.predict": "tensorflow_serving.apis.predict_pb2",
    "serving.classification": "tensorflow_serving.apis.classification_pb2",
    "serving.regression": "tensorflow_serving.apis.regression_pb2",
    "serving.get_model_metadata": "tensorflow_serving.apis.get_model_metadata_pb2",
    "serving.get_model_status": "tensorflow_serving.apis.get_model_status_pb2",
    "serving.prediction_service": "tensorflow_serving.apis.prediction_service_pb2",
    "serving.model_service": "tensorflow_serving.apis.model_service_pb2",
    "serving.inference": "tensorflow_serving.apis.inference_pb2",
    "serving.prediction_log": "tensorflow_serving.apis.prediction_log_pb2",
}

# Fields asyncflow does not model (kept as unknown fields when present).
ALLOWED_MISSING = {
    "GraphDef.debug_info",
    "ServerDef.default_session_config",  # a ConfigProto: a Python object in asyncflow
    "ServerDef.cluster_device_filters",
    "PredictRequest.predict_streamed_options",
    "PredictRequest.client_id",
    "PredictRequest.request_options",
    "LogMetadata.sampling_config",
    "PredictionLog.session_run_log",
}

# RPCs asyncflow's server does not serve (answered UNIMPLEMENTED).
ALLOWED_MISSING_METHODS = {
    "ModelService.HandleReloadConfigRequest",
}


def compare_message(ours, theirs, path, out):
    ours_fields = {f.name: f for f in ours.fields}
    for f in theirs.fields:
        name = f"{path}.{f.name}"
        mine = ours_fields.get(f.name)
        if mine is None:
            if name not in ALLOWED_MISSING:
                out.append(f"missing field {name} = {f.number}")
            continue
        if mine.number != f.number:
            out.append(f"{name}: number {mine.number} != TF's {f.number}")
        if mine.type != f.type:
            out.append(f"{name}: type {mine.type} != TF's {f.type}")
        if mine.is_repeated != f.is_repeated:
            out.append(f"{name}: repeated {mine.is_repeated} != TF's {f.is_repeated}")
        if f.message_type is not None and mine.message_type is not None:
            if mine.message_type.name != f.message_type.name:
                out.append(f"{name}: message {mine.message_type.name} != {f.message_type.name}")
        if f.enum_type is not None and mine.enum_type is not None:
            compare_enum(mine.enum_type, f.enum_type, name, out)
        if (f.containing_oneof is None) != (mine.containing_oneof is None):
            out.append(f"{name}: oneof membership differs")
    for name in ours_fields:
        if name not in {f.name for f in theirs.fields}:
            out.append(f"extra field {path}.{name}")
    for nested in theirs.nested_types:
        if nested.GetOptions().map_entry:
            continue
        mine = ours.nested_types_by_name.get(nested.name)
        if mine is not None:
            compare_message(mine, nested, f"{path}.{nested.name}", out)
    for enum in theirs.enum_types:
        mine = ours.enum_types_by_name.get(enum.name)
        if mine is not None:
            compare_enum(mine, enum, f"{path}.{enum.name}", out)


def compare_enum(ours, theirs, path, out):
    mine = {v.name: v.number for v in ours.values}
    for v in theirs.values:
        if mine.get(v.name) != v.number:
            out.append(f"enum {path}.{v.name}: {mine.get(v.name)} != TF's {v.number}")


def compare_service(ours, theirs, path, out):
    if theirs is None:
        out.append(f"TF has no service {path}")
        return
    mine = {m.name: m for m in ours.methods}
    for m in theirs.methods:
        name = f"{path}.{m.name}"
        if m.name not in mine:
            if name not in ALLOWED_MISSING_METHODS:
                out.append(f"missing method {name}")
            continue
        for kind in ("input_type", "output_type"):
            a, b = getattr(mine[m.name], kind).name, getattr(m, kind).name
            if a != b:
                out.append(f"{name}: {kind} {a} != TF's {b}")


def main() -> int:
    _protos_without_the_package()
    out: list[str] = []
    for ours_name, tf_name in PAIRS.items():
        ours = importlib.import_module(f"asyncflow.protos.{ours_name}_pb2").DESCRIPTOR
        theirs = importlib.import_module(tf_name).DESCRIPTOR
        for name, msg in ours.message_types_by_name.items():
            tf_msg = theirs.message_types_by_name.get(name)
            for dep in theirs.dependencies:  # TF moved a few (HistogramProto) to tsl files
                tf_msg = tf_msg or dep.message_types_by_name.get(name)
            if tf_msg is None:
                out.append(f"{ours_name}: TF has no message {name}")
                continue
            compare_message(msg, tf_msg, name, out)
        for name, enum in ours.enum_types_by_name.items():
            tf_enum = theirs.enum_types_by_name.get(name)
            if tf_enum is None:
                out.append(f"{ours_name}: TF has no enum {name}")
                continue
            compare_enum(enum, tf_enum, name, out)
        for name, service in ours.services_by_name.items():
            compare_service(service, theirs.services_by_name.get(name), name, out)
    print("\n".join(out) or "all messages agree with TensorFlow's")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
