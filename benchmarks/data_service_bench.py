"""tf.data service throughput: elements/s a consumer reads through a local dispatcher
and worker, beside reading the same dataset directly (the reference, in the same run).

    .venv/bin/python benchmarks/data_service_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/data_service_bench.py --backend tf

Prints one JSON object (the last line of stdout): for each case, elements/s through
the service (`service_eps`), read directly (`direct_eps`) and their ratio.  Cases:
- scalar: `range(N)` (int64 scalars: the per-element cost);
- vec1k: `range(N).map(fill [1024] float32)` (4 KiB elements);
each read with one-shot iterators and `sess.run(get_next)` per element, best of
`--repeat` passes, parallel_epochs over one worker, compression AUTO and None.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core import Backend  # noqa: E402


def _pipeline(tf, case: str, n: int):
    ds = tf.data.Dataset.range(n)
    if case == "vec1k":
        ds = ds.map(lambda x: tf.fill([1024], tf.cast(x, tf.float32)))
    return ds


def _eps(b: Backend, make, n: int, repeat: int) -> float:
    best = 0.0
    for _ in range(repeat):
        with b.tf.Graph().as_default():
            nxt = b.tf.data.make_one_shot_iterator(make()).get_next()
            with b.session() as sess:
                sess.run(nxt)  # (the pass started: connections, registration)
                t = time.perf_counter()
                for _ in range(n - 1):
                    sess.run(nxt)
                best = max(best, (n - 1) / (time.perf_counter() - t))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="asyncflow", choices=["asyncflow", "tf"])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    b = Backend(args.backend)
    svc = b.tf.data.experimental.service
    servers = svc
    if args.backend == "tf":  # (tf.compat.v1 has no servers: TF 2's are the same ones)
        import tensorflow

        servers = tensorflow.data.experimental.service
    d = servers.DispatchServer()
    w = servers.WorkerServer(servers.WorkerConfig(dispatcher_address=d.target.split("://")[1]))
    out = {"backend": args.backend, "version": b.version, "n": args.n}
    try:
        for case in ("scalar", "vec1k"):
            direct = _eps(b, lambda c=case: _pipeline(b.tf, c, args.n), args.n, args.repeat)
            for compression in ("AUTO", None):

                def make(c=case, z=compression):
                    return _pipeline(b.tf, c, args.n).apply(
                        svc.distribute("parallel_epochs", d.target, compression=z)
                    )

                eps = _eps(b, make, args.n, args.repeat)
                out[f"{case}_{compression}"] = {
                    "service_eps": round(eps),
                    "direct_eps": round(direct),
                    "ratio": round(eps / direct, 3),
                }
                print(case, compression, out[f"{case}_{compression}"], file=sys.stderr)
    finally:
        w._stop()
        d._stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
