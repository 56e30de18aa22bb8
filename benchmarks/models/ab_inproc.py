"""One process, one model, two settings alternated round by round (issue 21): A/B figures
that other processes' load moves less than separate runs do (benchmarks/models/ab_env.py).

    .venv/bin/python benchmarks/models/ab_inproc.py vae \\
        --attr asyncflow.ops.fused_updates:_SPLIT_MIN=131072
    .venv/bin/python benchmarks/models/ab_inproc.py lstm_static \\
        --attr asyncflow.ops.matmul_sum:_PAIR_MIN=1000000

`--attr MODULE:NAME=VALUE` is setting B: the module attribute at VALUE (a number, True
or False), A its own value; with several `--attr`, B sets them all.  Each setting has
its own session of the one graph, its plans compiled with the attribute at that
setting's value (what graph passes and the lowering read), and the attribute is set
again before each of its rounds (what kernels read at run time).  Each round runs 3
untimed steps then `--steps` timed ones under A and under B, in alternating order; the
line gives the medians over rounds of ms per step, wall and CPU (`time.process_time`,
all threads), B/A, and in how many rounds B's wall time was the lower.  Same graph, same
feeds (models.py's).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import numpy as np  # noqa: E402
from models import MODELS, _tf  # noqa: E402


def _number(text: str):
    """A value of the command line: an int (any base: 0x20000), a float, True/False."""
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text, 0)
    except ValueError:
        return float(text)


def attr_settings(specs: list[str]):
    """`--attr MODULE:NAME=VALUE` specs as [(module, name, (A's value, B's value))], and
    `use(j)`, which sets every one to side j's value (0: A, 1: B)."""
    settings = []
    for spec in specs:
        target, text = spec.split("=", 1)
        mod_name, attr = target.split(":")
        mod = importlib.import_module(mod_name)
        settings.append((mod, attr, (getattr(mod, attr), _number(text))))

    def use(j: int) -> None:
        for mod, attr, values in settings:
            setattr(mod, attr, values[j])

    return settings, use


def model_graph(tf, model: str):
    """models.py's `model` in a graph of its own: (graph, feeds, train, init, 4 feed
    dicts), the same values every time (seed 0)."""
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        feeds, train, _, batch = MODELS[model](tf, rng)
        init = tf.global_variables_initializer()
    return graph, feeds, train, init, [dict(zip(feeds, batch())) for _ in range(4)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--attr", required=True, action="append", help="MODULE:NAME=VALUE, setting B")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args(argv)
    tf = _tf("asyncflow")
    _, use = attr_settings(args.attr)
    graph, _, train, init, batches = model_graph(tf, args.model)
    sessions = []
    try:
        for j in (0, 1):
            use(j)
            s = tf.Session(graph=graph)
            sessions.append(s)
            s.run(init)
            for k in range(30):  # (the plans compile with this setting)
                s.run(train, batches[k % 4])
        from asyncflow.ops import blas, fused_elementwise_jit

        fused_elementwise_jit.wait()
        blas.warm_epilogues()
        walls: list[list[float]] = [[], []]
        cpus: list[list[float]] = [[], []]
        for r in range(args.rounds):
            for j in (0, 1) if r % 2 == 0 else (1, 0):
                use(j)
                s = sessions[j]
                for k in range(3):
                    s.run(train, batches[k % 4])
                t0, c0 = time.perf_counter(), time.process_time()
                for k in range(args.steps):
                    s.run(train, batches[k % 4])
                walls[j].append((time.perf_counter() - t0) / args.steps * 1e3)
                cpus[j].append((time.process_time() - c0) / args.steps * 1e3)
    finally:
        use(0)
        for s in sessions:
            s.close()
    wa, wb = statistics.median(walls[0]), statistics.median(walls[1])
    ca, cb = statistics.median(cpus[0]), statistics.median(cpus[1])
    wins = sum(b < a for a, b in zip(walls[0], walls[1]))
    print(
        f"{args.model}: A {wa:.3f} ms ({ca:.3f} CPU), B [{' '.join(args.attr)}] {wb:.3f} ms "
        f"({cb:.3f} CPU), B/A {wb / wa:.3f}x ({cb / ca:.3f}x CPU), B faster in {wins}/"
        f"{args.rounds} rounds, load {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
