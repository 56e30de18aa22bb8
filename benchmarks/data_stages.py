"""Where data_bench.py's pipeline spends its time: CPU and wall microseconds per record
for growing prefixes of it, asyncflow beside TensorFlow.

    flock /tmp/bench.lock .venv/bin/python benchmarks/data_stages.py
    flock /tmp/bench.lock /work/tfvenv/bin/python benchmarks/data_stages.py --backend tf

Stages (over data_bench's TFRecord files of tf.Example records, batch 128): read+batch,
read+shuffle+batch, read+map(parse_single_example)+batch, read+map(identity)+batch, and
the full pipeline (parse, normalise, shuffle, batch, prefetch).  Each runs 3 passes of
`sess.run(get_next)` to the end; the median pass is reported.  CPU time
(all threads, child processes' too: data_bench.tree_cpu) is the steadier figure on a
shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from data_bench import backend, tree_cpu, write_files


def stages(tf, paths, dim):
    spec = {"x": tf.FixedLenFeature([dim], tf.float32), "y": tf.FixedLenFeature([], tf.int64)}

    def rec():
        return tf.data.TFRecordDataset(paths)

    def parse(r):
        return tf.parse_single_example(r, spec)

    yield "read+batch", lambda: rec().batch(128)
    yield "read+shuffle+batch", lambda: rec().shuffle(5000, seed=1).batch(128)
    yield "read+map(parse)+batch", lambda: rec().map(parse).batch(128)
    yield "read+map(identity)+batch", lambda: rec().map(lambda r: r).batch(128)
    yield (
        "full",
        lambda: (
            rec()
            .map(parse)
            .map(lambda f: (f["x"] * 0.5, f["y"]))
            .shuffle(5000, seed=1)
            .batch(128)
            .prefetch(2)
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    ap.add_argument("--records", type=int, default=8000)
    args = ap.parse_args()
    args.files, args.dim = 4, 64
    os.environ.setdefault("ASYNCFLOW_DATA_WORKER", "0")  # the stages in-process
    tf = backend(args.backend)
    paths = write_files(tf, args)
    res = {"backend": args.backend}
    for name, make in stages(tf, paths, args.dim):
        g = tf.Graph()
        with g.as_default():
            it = make().make_initializable_iterator()
            nxt = it.get_next()
            with tf.Session(graph=g) as sess:
                runs = []
                for _ in range(3):
                    sess.run(it.initializer)
                    c, w = tree_cpu(), time.perf_counter()
                    try:
                        while True:
                            sess.run(nxt)
                    except tf.errors.OutOfRangeError:
                        pass
                    runs.append((tree_cpu() - c, time.perf_counter() - w))
                cpu, wall = sorted(runs)[1]
                per = 1e6 / args.records
                res[name] = {"cpu_us": round(cpu * per, 1), "wall_us": round(wall * per, 1)}
                print(f"{name:26s} cpu {cpu * per:7.1f} us/record  wall {wall * per:7.1f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
