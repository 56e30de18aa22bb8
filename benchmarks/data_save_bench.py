"""tf.data save / load throughput, asyncflow against TF 2.21 on the same code (TF1 graph
mode): save 20,000 elements (a float32[64] and a short string each) with each
compression, then load them back (one shard, read through the default reader), one
`sess.run` per batch of 500.  Prints one JSON object of median seconds per phase.

    .venv/bin/python benchmarks/data_save_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/data_save_bench.py --backend tf

Alternate the two in one shell loop (under /work/bin/cpu-quiet) and compare medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

N = 20_000


def _tf(backend):
    if backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        return tf
    import asyncflow as tf

    return tf


def run(tf, comp, workdir) -> tuple[float, float]:
    x = np.random.default_rng(0).random((N, 64), dtype=np.float32)
    words = np.array([b"w%d" % i for i in range(N)], dtype=object)
    path = os.path.join(workdir, f"s_{comp}")
    shutil.rmtree(path, ignore_errors=True)
    with tf.Graph().as_default(), tf.Session() as s:
        op = tf.data.Dataset.from_tensor_slices((x, words)).save(path, compression=comp)
        t = time.perf_counter()
        s.run(op)
        t_save = time.perf_counter() - t
    with tf.Graph().as_default(), tf.Session() as s:
        ds = tf.data.Dataset.load(path, compression=comp).batch(500)
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        t = time.perf_counter()
        rows = 0
        while True:
            try:
                rows += len(s.run(nxt)[0])
            except tf.errors.OutOfRangeError:
                break
        t_load = time.perf_counter() - t
    assert rows == N
    return t_save, t_load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("asyncflow", "tf"), required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tf = _tf(args.backend)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for comp in (None, "GZIP", "SNAPPY"):
            runs = [run(tf, comp, d) for _ in range(args.repeats)]
            key = comp or "NONE"
            out[f"save_{key}"] = statistics.median(r[0] for r in runs)
            out[f"load_{key}"] = statistics.median(r[1] for r in runs)
    print(json.dumps({"backend": args.backend, **{k: round(v, 4) for k, v in out.items()}}))


if __name__ == "__main__":
    main()
