"""tf.io.parse_example throughput: asyncflow's ParseExample beside protobuf's own parser
and TensorFlow's kernel, on the same serialized records.

    .venv/bin/python benchmarks/parse_example_bench.py            # asyncflow + protobuf
    /work/tfvenv/bin/python benchmarks/parse_example_bench.py --backend tf
    .venv/bin/python benchmarks/parse_example_bench.py --all     # both, TF in a subprocess

Records: `--records` Examples, each {"x": 16 floats, "label": 1 int64, "name": 1 byte
string, "tags": 0-4 byte strings}, parsed in batches of `--batch` by the same TF1 code
(`parse_example` with three FixedLenFeatures and a VarLenFeature, run through a
Session).  "protobuf" is `Example.FromString` on every record plus reading each
feature's values into a list (what any Python parse must at least do).  Reports
records/s (median of `--repeats`); one JSON object on the last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import time


def records(n: int, seed: int = 0) -> list[bytes]:
    from google.protobuf import descriptor_pool  # noqa: F401 - either backend's protobuf

    try:
        from asyncflow.protos.example_pb2 import Example
    except ImportError:  # TF's interpreter
        from tensorflow.core.example.example_pb2 import Example
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ex = Example()
        f = ex.features.feature
        f["x"].float_list.value.extend(rng.random() for _ in range(16))
        f["label"].int64_list.value.append(i % 10)
        f["name"].bytes_list.value.append(b"rec%d" % i)
        f["tags"].bytes_list.value.extend(b"t%d" % rng.randrange(100) for _ in range(i % 5))
        out.append(ex.SerializeToString())
    return out


def _time(fn, repeats: int) -> list[float]:
    fn()  # warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def bench(backend: str, n: int, batch: int, repeats: int) -> dict:
    if backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
    else:
        import asyncflow as tf
    data = records(n)
    batches = [data[i : i + batch] for i in range(0, n, batch)]
    features = {
        "x": tf.io.FixedLenFeature([16], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "name": tf.io.FixedLenFeature([], tf.string),
        "tags": tf.io.VarLenFeature(tf.string),
    }
    g = tf.Graph()
    with g.as_default():
        ser = tf.placeholder(tf.string, [None])
        parsed = tf.io.parse_example(ser, features)
        fetch = [parsed["x"], parsed["label"], parsed["name"], parsed["tags"].values]
        sess = tf.Session(graph=g)
        run = sess.make_callable(fetch, [ser])

        def parse_all():
            for b in batches:
                run(b)

        times = _time(parse_all, repeats)
        sess.close()
    out = {"backend": backend, "records": n, "batch": batch,
           "records_per_s": n / statistics.median(times)}  # fmt: skip
    if backend == "asyncflow":
        from asyncflow.protos.example_pb2 import Example

        def protobuf_all():
            for s in data:
                f = Example.FromString(s).features.feature
                list(f["x"].float_list.value)
                list(f["label"].int64_list.value)
                list(f["name"].bytes_list.value)
                list(f["tags"].bytes_list.value)

        out["protobuf_records_per_s"] = n / statistics.median(_time(protobuf_all, repeats))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="asyncflow", choices=["asyncflow", "tf"])
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--all", action="store_true", help="also run TF in a subprocess")
    args = p.parse_args()
    out = bench(args.backend, args.records, args.batch, args.repeats)
    if args.all:
        tf_python = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
        cmd = [tf_python, __file__, "--backend", "tf", "--records", str(args.records),
               "--batch", str(args.batch), "--repeats", str(args.repeats)]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        lines = res.stdout.strip().splitlines()
        if res.returncode == 0 and lines:
            out["tf_records_per_s"] = json.loads(lines[-1])["records_per_s"]
            out["asyncflow_over_tf"] = out["records_per_s"] / out["tf_records_per_s"]
        out["asyncflow_over_protobuf"] = out["records_per_s"] / out["protobuf_records_per_s"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
