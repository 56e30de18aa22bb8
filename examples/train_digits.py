"""Train an MLP and a small CNN on scikit-learn's handwritten digits (8x8, no download).

A plain TF1-style training script: placeholders, variables, a loss, an optimizer's
`minimize`, and `sess.run(train_op)` in a loop, with a tqdm progress bar and the test
accuracy at the end.  With `--logdir`, it writes TensorBoard summaries as TF1's
tutorials do: the loss and the batch accuracy as scalars, a histogram of every weight
and bias, `tf.summary.merge_all()` fetched with the training op every
`--summary-every` steps (default: every step), and a `FileWriter` with the graph.
Needs the `examples` extra (scikit-learn, tqdm).

    .venv/bin/python examples/train_digits.py            # both models
    .venv/bin/python examples/train_digits.py --model cnn --epochs 20
    .venv/bin/python examples/train_digits.py --model mlp --logdir /tmp/digits
    tensorboard --logdir /tmp/digits                     # (TensorBoard installed apart)

The graph is built by `build_model(tf, ...)` from TF1 names only, so the same function
builds it on TensorFlow (`tensorflow.compat.v1`): benchmarks/summary_example_bench.py
times this model's steps with and without its summaries on both.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np


def load_data(seed: int):
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit(
            f"this example needs scikit-learn and tqdm (the `examples` extra): {exc}"
        ) from exc
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # [N, 8, 8, 1] in [0, 1]
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)


def _weight(tf, shape, name, seed):
    fan_in = int(np.prod(shape[:-1]))
    init = tf.truncated_normal(shape, stddev=np.sqrt(2.0 / fan_in), seed=seed)
    return tf.Variable(init, name=name)


def _bias(tf, n, name):
    return tf.Variable(tf.zeros([n]), name=name)


def mlp(tf, images, seed):
    """64 -> 256 -> 128 -> 10, ReLU."""
    h = tf.reshape(images, [-1, 64])
    for i, (n_in, n_out) in enumerate([(64, 256), (256, 128)]):
        with tf.name_scope(f"hidden{i + 1}"):
            w = _weight(tf, [n_in, n_out], "w", seed + i)
            h = tf.nn.relu(tf.matmul(h, w) + _bias(tf, n_out, "b"))
    with tf.name_scope("logits"):
        return tf.matmul(h, _weight(tf, [128, 10], "w", seed + 9)) + _bias(tf, 10, "b")


def cnn(tf, images, seed):
    """conv 3x3x32 SAME + ReLU + 2x2 max-pool; conv 3x3x64 SAME + ReLU + 2x2 max-pool;
    dense 128 ReLU; dense 10."""
    h = images
    for i, (c_in, c_out) in enumerate([(1, 32), (32, 64)]):
        with tf.name_scope(f"conv{i + 1}"):
            w = _weight(tf, [3, 3, c_in, c_out], "w", seed + i)
            h = tf.nn.conv2d(h, w, strides=[1, 1, 1, 1], padding="SAME")
            h = tf.nn.relu(h + _bias(tf, c_out, "b"))
            h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    h = tf.reshape(h, [-1, 2 * 2 * 64])
    with tf.name_scope("dense"):
        h = tf.nn.relu(tf.matmul(h, _weight(tf, [256, 128], "w", seed + 5)) + _bias(tf, 128, "b"))
    with tf.name_scope("logits"):
        return tf.matmul(h, _weight(tf, [128, 10], "w", seed + 9)) + _bias(tf, 10, "b")


def build_model(tf, model_name: str, lr: float, seed: int, summaries: bool = True):
    """The training graph in a new `tf.Graph()`, with `tf` either asyncflow or
    `tensorflow.compat.v1`: placeholders, loss, Adam's train op, predictions, and (with
    `summaries`) the merged summary op of the loss, the batch accuracy and a histogram of
    each trainable variable (None without)."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf.placeholder(tf.float32, [None, 8, 8, 1], name="images")
        labels = tf.placeholder(tf.int32, [None], name="labels")
        logits = {"mlp": mlp, "cnn": cnn}[model_name](tf, images, seed)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(lr).minimize(loss, global_step=global_step)
        predictions = tf.argmax(logits, 1, output_type=tf.int32)
        merged = None
        if summaries:
            accuracy = tf.reduce_mean(tf.cast(tf.equal(predictions, labels), tf.float32))
            tf.summary.scalar("loss", loss)
            tf.summary.scalar("accuracy", accuracy)
            for var in tf.trainable_variables():
                tf.summary.histogram(var.op.name, var)
            merged = tf.summary.merge_all()
        init = tf.global_variables_initializer()
    return SimpleNamespace(
        graph=graph,
        images=images,
        labels=labels,
        loss=loss,
        train_op=train_op,
        global_step=global_step,
        predictions=predictions,
        merged=merged,
        init=init,
    )


def train(
    model_name: str,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    logdir: str | None = None,
    summary_every: int = 1,
) -> float:
    try:
        from tqdm import tqdm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit(f"this example needs tqdm (the `examples` extra): {exc}") from exc
    import asyncflow as tf

    x_train, x_test, y_train, y_test = load_data(seed)
    m = build_model(tf, model_name, lr, seed, summaries=logdir is not None)
    rng = np.random.RandomState(seed)
    steps_per_epoch = int(np.ceil(len(x_train) / batch_size))
    start = time.perf_counter()
    with tf.Session(graph=m.graph) as sess:
        sess.run(m.init)
        writer = None
        if logdir is not None:
            writer = tf.summary.FileWriter(f"{logdir}/{model_name}", sess.graph)
        bar = tqdm(total=epochs * steps_per_epoch, desc=f"{model_name:>3}", unit="step")
        step = 0
        for epoch in range(epochs):
            order = rng.permutation(len(x_train))
            for k in range(steps_per_epoch):
                idx = order[k * batch_size : (k + 1) * batch_size]
                feed = {m.images: x_train[idx], m.labels: y_train[idx]}
                if writer is not None and step % summary_every == 0:
                    _, loss_value, summary = sess.run([m.train_op, m.loss, m.merged], feed)
                    writer.add_summary(summary, step)
                else:
                    _, loss_value = sess.run([m.train_op, m.loss], feed)
                step += 1
                bar.update()
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss_value:.4f}")
        bar.close()
        if writer is not None:
            writer.close()
        predicted = sess.run(m.predictions, {m.images: x_test})
        steps = sess.run(m.global_step)
    accuracy = float(np.mean(predicted == y_test))
    elapsed = time.perf_counter() - start
    print(
        f"{model_name}: test accuracy {accuracy:.2%} on {len(y_test)} digits "
        f"({steps} steps, {elapsed:.1f} s)"
    )
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logdir", default=None, help="write TensorBoard summaries here")
    parser.add_argument("--summary-every", type=int, default=1, help="steps between summaries")
    args = parser.parse_args()
    models = ["mlp", "cnn"] if args.model == "both" else [args.model]
    for name in models:
        train(
            name, args.epochs, args.batch_size, args.lr, args.seed, args.logdir, args.summary_every
        )


if __name__ == "__main__":
    main()
