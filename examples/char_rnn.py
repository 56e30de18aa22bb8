"""A character-level LSTM language model trained on asyncflow's own source code.

    .venv/bin/python examples/char_rnn.py [--epochs 5] [--steps 50]

Builds a TF1-style graph: embedding -> BasicLSTMCell under `dynamic_rnn` (a while_loop
over time, differentiated through per-loop stacks) -> softmax over characters, trained
with Adam.  Prints the mean loss of each epoch (a tqdm bar per epoch) and, at the end,
text sampled one character at a time from the trained model.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np
from tqdm import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import asyncflow as af  # noqa: E402
from asyncflow import rnn, rnn_cell  # noqa: E402


def load_text(limit: int = 200_000) -> str:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "asyncflow")
    parts = [
        open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(root, "*.py")))
    ]
    return "".join(parts)[:limit]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50, help="batches per epoch")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--sample", type=int, default=300)
    args = ap.parse_args()

    text = load_text()
    chars = sorted(set(text))
    idx = {c: i for i, c in enumerate(chars)}
    data = np.array([idx[c] for c in text], np.int32)
    vocab = len(chars)
    rng = np.random.RandomState(0)
    print(f"{len(text)} characters of source, vocabulary {vocab}")

    graph = af.Graph()
    with graph.as_default():
        af.set_random_seed(0)
        x = af.placeholder(af.int32, [None, None], name="x")
        y = af.placeholder(af.int32, [None, None], name="y")
        emb = af.get_variable("embedding", [vocab, 32])
        cell = rnn_cell.BasicLSTMCell(args.hidden)
        init_c = af.placeholder_with_default(af.zeros([1, args.hidden]), [None, args.hidden])
        init_h = af.placeholder_with_default(af.zeros([1, args.hidden]), [None, args.hidden])
        inputs = af.nn.embedding_lookup(emb, x)
        outputs, state = rnn.dynamic_rnn(cell, inputs, dtype=af.float32)
        with af.variable_scope("softmax"):
            w = af.get_variable("w", [args.hidden, vocab])
            b = af.get_variable("b", [vocab], initializer=af.zeros_initializer())
        logits = af.matmul(af.reshape(outputs, [-1, args.hidden]), w) + b
        loss = af.reduce_mean(
            af.nn.sparse_softmax_cross_entropy_with_logits(
                labels=af.reshape(y, [-1]), logits=logits
            )
        )
        train = af.train.AdamOptimizer(0.005).minimize(loss)
        # Sampling: one step of the same cell from a given state.
        with af.variable_scope("rnn", reuse=True):
            step_out, step_state = cell(
                af.nn.embedding_lookup(emb, x[:, 0]), rnn_cell.LSTMStateTuple(init_c, init_h)
            )
        step_probs = af.nn.softmax(af.matmul(step_out, w) + b)
        init = af.global_variables_initializer()

    with af.Session(graph=graph) as sess:
        sess.run(init)
        for epoch in range(args.epochs):
            losses = []
            bar = tqdm(range(args.steps), desc=f"epoch {epoch + 1}", leave=False)
            for _ in bar:
                starts = rng.randint(0, len(data) - args.seq - 1, args.batch)
                xb = np.stack([data[s : s + args.seq] for s in starts])
                yb = np.stack([data[s + 1 : s + args.seq + 1] for s in starts])
                lv, _ = sess.run([loss, train], {x: xb, y: yb})
                losses.append(lv)
                bar.set_postfix(loss=f"{lv:.3f}")
            print(f"epoch {epoch + 1}: loss {np.mean(losses):.3f}")
        c = np.zeros([1, args.hidden], np.float32)
        h = np.zeros([1, args.hidden], np.float32)
        ch = idx["d"]
        out = ["d"]
        for _ in range(args.sample):
            p, (c, h) = sess.run([step_probs, step_state], {x: [[ch]], init_c: c, init_h: h})
            p = p[0].astype(np.float64)
            ch = int(rng.choice(vocab, p=p / p.sum()))
            out.append(chars[ch])
        print("---- sample ----")
        print("".join(out))


if __name__ == "__main__":
    main()
