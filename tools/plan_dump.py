"""Digest (and optionally dump) each benchmark model's partition after the graph passes.

    .venv/bin/python tools/plan_dump.py [--out DIR] [model ...]

A check that a change to asyncflow/graph_passes.py or a pass in ops/ leaves what the
passes produce unchanged: run it before and after, compare the digests (and, with
--out, diff the dumps).  Every model is built on one CPU device, as the single-device
session builds it; prints `model nodes-before nodes-after passes-seconds digest`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "models"))

import asyncflow as tf  # noqa: E402
from asyncflow import graph_passes, partition  # noqa: E402
from asyncflow.devices.cpu import CPUDevice  # noqa: E402


def _attr(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array({v.dtype},{v.shape},{hashlib.sha256(v.tobytes()).hexdigest()[:16]})"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_attr(x) for x in v) + "]"
    return repr(v)


def describe(p) -> list[str]:
    """One line a node: index, op type, name, device, attrs, inputs, control edges;
    then the fetches."""
    lines = []
    for i, n in enumerate(p.nodes):
        attrs = ",".join(f"{k}={_attr(v)}" for k, v in sorted(n.op._attrs.items()))
        lines.append(
            f"{i} {n.op.type} {n.op.name} {n.device.name} {attrs} "
            f"in={[tuple(s) for s in n.inputs]} ctl={list(n.controls)}"
        )
    lines.append(f"fetches={[tuple(f) if isinstance(f, list) else f for f in p.fetches]}")
    return lines


def build(name: str):
    """The model's training step as one CPU partition, before the passes."""
    from models import MODELS

    g = tf.Graph()
    with g.as_default():
        feeds, train, loss, _batch = MODELS[name](tf, np.random.default_rng(0))
        train = train if isinstance(train, list) else [train]
        fetches = ([loss] if loss is not None else []) + train
        order = partition.prune(list(feeds), fetches)
        dev = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0")
        parts, _ = partition.partition(
            order, dict.fromkeys(order, dev), list(feeds), fetches, tf.Graph()
        )
    return parts


def main(argv=None) -> int:
    from models import MODELS

    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    for name in args.models or list(MODELS):
        parts = build(name)
        before = sum(len(p.nodes) for p in parts)
        t = time.perf_counter()
        for p in parts:
            graph_passes.run_graph_passes(p, tf.Graph())
        dt = time.perf_counter() - t
        text = "\n".join(line for p in parts for line in describe(p)) + "\n"
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        after = sum(len(p.nodes) for p in parts)
        print(f"{name} {before} {after} {dt:.3f} {digest}", flush=True)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, name + ".txt"), "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
