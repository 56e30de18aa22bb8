"""TF Serving's own gRPC client against `python -m asyncflow.serving`: same predictions
as REST and as NumPy.

    python tools/check_serving_grpc_tf.py [--tf-python /work/tfvenv/bin/python]

The client is TF Serving's: `tensorflow_serving.apis.prediction_service_pb2_grpc.
PredictionServiceStub` and the request/response classes generated from TF Serving's
public protos, as the tensorflow-serving-api package ships them, with the TensorProtos
of `tf.make_tensor_proto` / `tf.make_ndarray` (install beside TensorFlow:
`/work/tfvenv/bin/pip install --no-deps tensorflow-serving-api==2.21.0`).  It runs in
TF's interpreter, in a child process; the server runs from this checkout.  Nothing of
TF is a dependency of the project: tests/test_serving_grpc.py replays the bytes such a
client sends (tests/fixtures/record_serving_grpc_tf.py) without TF.

The model is serving_rest_bench's digits MLP (64-128-10, softmax); the checks: a
Predict of 1 and of 5 rows (latest version, and `version.value` 1), GetModelMetadata
and GetModelStatus, each compared with the REST answer for the same rows, and the
predictions with NumPy's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

# Runs under TF's interpreter: TF Serving's generated client, nothing of asyncflow.
_CLIENT = r"""
import json, sys
import grpc, numpy as np, tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc, predict_pb2,
    prediction_service_pb2_grpc)

port, rows = int(sys.argv[1]), np.asarray(json.loads(sys.argv[2]), np.float32)
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
predict = prediction_service_pb2_grpc.PredictionServiceStub(channel)
out = {}
for key, n, version in (("one", 1, None), ("five", 5, None), ("v1", 5, 1)):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "digits"
    request.model_spec.signature_name = "serving_default"
    if version is not None:
        request.model_spec.version.value = version
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(rows[:n]))
    response = predict.Predict(request, timeout=30)
    out[key] = {
        "probs": tf.make_ndarray(response.outputs["probs"]).tolist(),
        "dtype": str(tf.make_ndarray(response.outputs["probs"]).dtype),
        "version": response.model_spec.version.value,
    }
request = get_model_metadata_pb2.GetModelMetadataRequest()
request.model_spec.name = "digits"
request.metadata_field.append("signature_def")
response = predict.GetModelMetadata(request, timeout=30)
signatures = get_model_metadata_pb2.SignatureDefMap()
response.metadata["signature_def"].Unpack(signatures)
sd = signatures.signature_def["serving_default"]
out["metadata"] = {
    "inputs": {k: v.name for k, v in sd.inputs.items()},
    "outputs": {k: v.name for k, v in sd.outputs.items()},
    "method_name": sd.method_name,
}
request = get_model_status_pb2.GetModelStatusRequest()
request.model_spec.name = "digits"
status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(request, timeout=30)
out["status"] = [(s.version, s.state) for s in status.model_version_status]
print(json.dumps(out))
"""


def _rest(port: int, path: str, doc=None):
    url = f"http://127.0.0.1:{port}/v1/models/digits{path}"
    data = None if doc is None else json.dumps(doc).encode()
    with urllib.request.urlopen(url, data=data, timeout=30) as r:
        return json.loads(r.read())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    args = p.parse_args(argv)
    from serving_rest_bench import MODEL, export, make_weights, numpy_model

    weights = make_weights()
    rows = np.random.default_rng(3).random((5, 64), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, MODEL)
        export(weights, base)
        os.rename(os.path.join(base, "1"), os.path.join(base, "2"))
        export(weights, base)  # the same model as version 1 too
        config = os.path.join(tmp, "models.config")
        with open(config, "w") as f:  # both versions served (TF Serving's text format)
            f.write(
                f'model_config_list {{ config {{ name: "{MODEL}" base_path: "{base}" '
                'model_platform: "tensorflow" model_version_policy { all {} } } }\n'
            )
        server = subprocess.Popen(
            [sys.executable, "-m", "asyncflow.serving", "--rest_api_port=0", "--port=0",
             "--rest_api_host=127.0.0.1", "--grpc_host=127.0.0.1",
             f"--model_config_file={config}", "--file_system_poll_wait_seconds=0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            grpc_port = rest_port = None
            for line in server.stdout:
                if "Running gRPC ModelServer at" in line:
                    grpc_port = int(line.split(":")[-1].split()[0])
                if "Exporting HTTP/REST API at" in line:
                    rest_port = int(line.split("API at ")[1].split(":")[1])
                    break
            if grpc_port is None or rest_port is None:
                raise RuntimeError("the server did not start")
            client = subprocess.run(
                [args.tf_python, "-c", _CLIENT, str(grpc_port), json.dumps(rows.tolist())],
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            if client.returncode:
                print(client.stderr[-3000:])
                return 1
            got = json.loads(client.stdout.strip().splitlines()[-1])
            failures = []

            def check(name, ok, detail=""):
                print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
                if not ok:
                    failures.append(name)

            for key, n, path in (("one", 1, ""), ("five", 5, ""), ("v1", 5, "/versions/1")):
                rest = np.asarray(
                    _rest(rest_port, path + ":predict", {"instances": rows[:n].tolist()})[
                        "predictions"
                    ],
                    np.float32,
                )
                grpc_probs = np.asarray(got[key]["probs"], np.float32)
                check(
                    f"Predict {key}: gRPC == REST",
                    grpc_probs.shape == (n, 10) and np.array_equal(grpc_probs, rest),
                    f"(shape {grpc_probs.shape}, dtype {got[key]['dtype']}, "
                    f"version {got[key]['version']})",
                )
                err = float(np.abs(grpc_probs - numpy_model(weights, rows[:n])).max())
                check(f"Predict {key}: == NumPy", err < 1e-6, f"(max |diff| {err:.1e})")
            check("Predict version 1 answered by version 1", got["v1"]["version"] == 1)
            check("Predict latest answered by version 2", got["five"]["version"] == 2)
            meta = _rest(rest_port, "/metadata")["metadata"]["signature_def"]["signature_def"]
            sd = meta["serving_default"]
            check(
                "GetModelMetadata == REST metadata",
                got["metadata"]
                == {
                    "inputs": {k: v["name"] for k, v in sd["inputs"].items()},
                    "outputs": {k: v["name"] for k, v in sd["outputs"].items()},
                    "method_name": sd["method_name"],
                },
                json.dumps(got["metadata"]),
            )
            states = {"AVAILABLE": 30, "END": 50}
            rest_status = [
                (int(s["version"]), states.get(s["state"]))
                for s in _rest(rest_port, "")["model_version_status"]
            ]
            check(
                "GetModelStatus == REST status",
                sorted(map(tuple, got["status"])) == sorted(rest_status),
                str(got["status"]),
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
