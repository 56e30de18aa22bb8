"""Checkpoint save throughput versus the disk's own sequential write speed (issue 7).

Saves N GiB of float32 variables (16 variables) with `af.train.Saver.save` and, beside
it in the same directory, writes the same bytes with a plain `write` + `fsync` to one
file.  Runs alternate (baseline, save, baseline, save, ...) so both see the same disk
and page-cache conditions; files are deleted between runs.  Reports each run's GB/s,
their medians and the ratio save/baseline (target: >= 0.50).

    .venv/bin/python benchmarks/save_bench.py [--gib 1] [--repeats 3] [--dir DIR] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np

import asyncflow as af
from asyncflow.train import saver as sv

N_VARS = 16


def _plain_write(path: str, arrays) -> float:
    t = time.perf_counter()
    with open(path, "wb") as f:
        for a in arrays:
            f.write(memoryview(a).cast("B"))
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.perf_counter() - t
    os.remove(path)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    total = int(args.gib * (1 << 30))
    per_var = total // N_VARS // 4
    workdir = tempfile.mkdtemp(prefix="save_bench_", dir=args.dir)
    rng = np.random.default_rng(0)
    values = [rng.random(per_var, dtype=np.float32) for _ in range(N_VARS)]
    nbytes = sum(v.nbytes for v in values)
    g = af.Graph()
    with g.as_default():
        feeds, inits, variables = [], [], []
        for i in range(N_VARS):
            p = af.placeholder(af.float32, [per_var], name=f"init_{i}")
            v = af.Variable(af.zeros([per_var], af.float32), name=f"var_{i}")
            feeds.append(p)
            inits.append(af.assign(v, p))
            variables.append(v)
        saver = sv.Saver(max_to_keep=1)
    baseline, saving = [], []
    try:
        with af.Session(graph=g) as sess:
            sess.run(inits, dict(zip(feeds, values)))
            del values  # the variables hold the bytes now; the baseline writes their values
            arrays = sess.run(variables)
            for r in range(args.repeats):
                baseline.append(_plain_write(os.path.join(workdir, "plain.bin"), arrays))
                t = time.perf_counter()
                saver.save(sess, os.path.join(workdir, "model.ckpt"), global_step=r,
                           write_meta_graph=False)  # fmt: skip
                saving.append(time.perf_counter() - t)
                sv.remove_checkpoint(os.path.join(workdir, f"model.ckpt-{r}"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    gbs = lambda ts: [nbytes / t / 1e9 for t in ts]
    result = {
        "bytes": nbytes,
        "baseline_GBps": gbs(baseline),
        "save_GBps": gbs(saving),
        "baseline_median_GBps": float(np.median(gbs(baseline))),
        "save_median_GBps": float(np.median(gbs(saving))),
    }
    result["ratio_median"] = result["save_median_GBps"] / result["baseline_median_GBps"]
    result["ratio_best"] = max(gbs(saving)) / max(gbs(baseline))
    print(json.dumps(result, indent=1))
    print(
        f"save {result['save_median_GBps']:.3f} GB/s vs plain write+fsync "
        f"{result['baseline_median_GBps']:.3f} GB/s: ratio {result['ratio_median']:.2f} "
        f"(best-of ratio {result['ratio_best']:.2f}; target >= 0.50)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
