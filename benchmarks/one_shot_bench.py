"""One-shot iterator step cost: `sess.run(get_next)` of a one-shot iterator beside the
same pipeline read through an initializable iterator (whose dataset ops run once, in
its initializer), per step, wall and CPU time.

    .venv/bin/python benchmarks/one_shot_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/one_shot_bench.py --backend tf

The pipeline: `from_tensor_slices((x, y)).map(f).shuffle(1000).batch(32).repeat()`
over 4096 rows of 16 floats.  TF builds a one-shot iterator's dataset once, when the
iterator is made (its `dataset_factory`), so the two cost the same per step there.
Prints one JSON object (the last line of stdout): for each iterator kind, the median
over `--repeat` runs of microseconds per step (`wall_us`, `cpu_us`), and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core import Backend  # noqa: E402


def _dataset(tf):
    rng = np.random.RandomState(0)
    x = rng.rand(4096, 16).astype(np.float32)
    y = rng.randint(0, 10, 4096).astype(np.int64)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.map(lambda a, b: (a * 2.0 - 1.0, b + 1))
    return ds.shuffle(1000, seed=1).batch(32).repeat()


def _per_step(b: Backend, kind: str, steps: int) -> tuple[float, float]:
    tf = b.tf
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        ds = _dataset(tf)
        if kind == "one_shot":
            it, init = tf.data.make_one_shot_iterator(ds), None
        else:
            it = tf.data.make_initializable_iterator(ds)
            init = it.initializer
        nxt = it.get_next()
        with b.session() as sess:
            if init is not None:
                sess.run(init)
            for _ in range(5):  # (the iterator made, the plans compiled, buffers filled)
                sess.run(nxt)
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                sess.run(nxt)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / steps * 1e6, cpu / steps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="asyncflow", choices=["asyncflow", "tf"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    b = Backend(args.backend)
    out: dict = {"backend": args.backend, "steps": args.steps}
    for kind in ("one_shot", "initializable"):
        runs = [_per_step(b, kind, args.steps) for _ in range(args.repeat)]
        out[kind] = {
            "wall_us": round(statistics.median(r[0] for r in runs), 1),
            "cpu_us": round(statistics.median(r[1] for r in runs), 1),
        }
        print(kind, out[kind], file=sys.stderr)
    out["one_shot_over_initializable_wall"] = round(
        out["one_shot"]["wall_us"] / out["initializable"]["wall_us"], 2
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
