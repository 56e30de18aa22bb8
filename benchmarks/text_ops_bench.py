"""Text and sparse-feature ops against TF 2.21: the same TF1 graph run by asyncflow and by
TensorFlow (graph mode), median step time per metric.

| metric | one step |
|---|---|
| decode | tf.strings.unicode_decode_with_offsets of 2,000 mixed-script strings (~40 chars) |
| ngrams | tf.strings.ngrams, widths (2, 3), of 2,000 ragged rows of 10 tokens |
| cross_hashed | tf.sparse.cross_hashed of two sparse columns and one dense, batch 2,000 |
| sparse_roundtrip | serialize_many_sparse then deserialize_many_sparse, batch 1,000 |

    .venv/bin/python benchmarks/text_ops_bench.py --rounds 3     # alternates both backends
    .venv/bin/python benchmarks/text_ops_bench.py --backend asyncflow   # one run, JSON

Each round runs one backend process then the other (alternating), each timing `--repeats`
steps after warm-up; the table gives the medians over rounds and the ratio
(asyncflow / TF; lower is better).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

TF_PYTHON = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")


def _load(backend):
    if backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import asyncflow as tf

    return tf


def _graphs(tf):
    """{metric: (fetch, feed)}: every input fed, so neither system folds the work away."""
    rng = np.random.default_rng(0)
    words = ["hello", "caf\u00e9", "\u4e2d\u6587", "\U0001f60a", "na\u00efve", "x"]
    text = np.array([" ".join(rng.choice(words, 7)).encode() for _ in range(2000)], object)
    s = tf.placeholder(tf.string, [None])
    out = {"decode": (tf.strings.unicode_decode_with_offsets(s, "UTF-8"), {s: text})}
    tokens = np.array([b"t%d" % rng.integers(50) for _ in range(20000)], object)
    tok, splits = tf.placeholder(tf.string, [None]), tf.placeholder(tf.int64, [None])
    rt = tf.RaggedTensor.from_row_splits(tok, splits)
    out["ngrams"] = (tf.strings.ngrams(rt, (2, 3)), {tok: tokens, splits: np.arange(0, 20001, 10)})
    n = 2000
    idx = np.array([[b, k] for b in range(n) for k in range(2)], np.int64)
    i = tf.placeholder(tf.int64, [None, 2])
    va, vb = tf.placeholder(tf.string, [None]), tf.placeholder(tf.int64, [None])
    d = tf.placeholder(tf.string, [None, 1])
    sa, sb = tf.SparseTensor(i, va, [n, 2]), tf.SparseTensor(i, vb, [n, 2])
    feed = {i: idx, va: np.array([b"a%d" % k for k in range(2 * n)], object),
            vb: np.arange(2 * n, dtype=np.int64),
            d: np.array([[b"d%d" % (k % 7)] for k in range(n)], object)}  # fmt: skip
    out["cross_hashed"] = (tf.sparse.cross_hashed([sa, sb, d], num_buckets=1000), feed)
    m = 1000
    sidx = np.array([[r, c] for r in range(m) for c in (0, 3)], np.int64)
    si, sv = tf.placeholder(tf.int64, [None, 2]), tf.placeholder(tf.float32, [None])
    sp = tf.SparseTensor(si, sv, [m, 5])
    back = tf.deserialize_many_sparse(tf.serialize_many_sparse(sp), tf.float32)
    feed = {si: sidx, sv: rng.standard_normal(2 * m).astype(np.float32)}
    out["sparse_roundtrip"] = (back, feed)
    return out


def run_backend(backend: str, repeats: int) -> dict:
    tf = _load(backend)
    result = {}
    with tf.Graph().as_default():
        graphs = _graphs(tf)
        with tf.Session() as sess:
            for name, (fetch, feed) in graphs.items():
                for _ in range(3):
                    sess.run(fetch, feed)
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    sess.run(fetch, feed)
                    times.append(time.perf_counter() - t0)
                result[name] = statistics.median(times) * 1e3
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["asyncflow", "tf"])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.backend:
        print(json.dumps(run_backend(args.backend, args.repeats)))
        return
    runs = {"asyncflow": [], "tf": []}
    for _ in range(args.rounds):
        for backend, python in (("asyncflow", sys.executable), ("tf", TF_PYTHON)):
            cmd = [python, __file__, "--backend", backend, "--repeats", str(args.repeats)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[backend].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{'metric':18} {'asyncflow ms':>13} {'TF ms':>9} {'ratio':>7}")
    for name in runs["asyncflow"][0]:
        ours = statistics.median(r[name] for r in runs["asyncflow"])
        theirs = statistics.median(r[name] for r in runs["tf"])
        print(f"{name:18} {ours:13.2f} {theirs:9.2f} {ours / theirs:7.1f}")
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
