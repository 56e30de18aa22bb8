"""Train an MLP and a small CNN on scikit-learn's handwritten digits (8x8, no download).

A plain TF1-style training script: placeholders, variables, a loss, an optimizer's
`minimize`, and `sess.run(train_op)` in a loop, with a tqdm progress bar and the test
accuracy at the end.  Needs the `examples` extra (scikit-learn, tqdm).

    .venv/bin/python examples/train_digits.py            # both models
    .venv/bin/python examples/train_digits.py --model cnn --epochs 20
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import asyncflow as tf
from asyncflow.ops import conv_ops, nn_impl, pooling_ops
from asyncflow.train.optimizers import AdamOptimizer
from asyncflow.train.training_util import get_or_create_global_step

try:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from tqdm import tqdm
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit(
        f"this example needs scikit-learn and tqdm (the `examples` extra): {exc}"
    ) from exc


def load_data(seed: int):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # [N, 8, 8, 1] in [0, 1]
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)


def _weight(shape, name, seed):
    fan_in = int(np.prod(shape[:-1]))
    init = tf.truncated_normal(shape, stddev=np.sqrt(2.0 / fan_in), seed=seed)
    return tf.Variable(init, name=name)


def _bias(n, name):
    return tf.Variable(tf.zeros([n]), name=name)


def mlp(images, seed):
    """64 -> 256 -> 128 -> 10, ReLU."""
    h = tf.reshape(images, [-1, 64])
    for i, (n_in, n_out) in enumerate([(64, 256), (256, 128)]):
        with tf.name_scope(f"hidden{i + 1}"):
            h = tf.nn.relu(tf.matmul(h, _weight([n_in, n_out], "w", seed + i)) + _bias(n_out, "b"))
    with tf.name_scope("logits"):
        return tf.matmul(h, _weight([128, 10], "w", seed + 9)) + _bias(10, "b")


def cnn(images, seed):
    """conv 3x3x32 SAME + ReLU + 2x2 max-pool; conv 3x3x64 SAME + ReLU + 2x2 max-pool;
    dense 128 ReLU; dense 10."""
    h = images
    for i, (c_in, c_out) in enumerate([(1, 32), (32, 64)]):
        with tf.name_scope(f"conv{i + 1}"):
            w = _weight([3, 3, c_in, c_out], "w", seed + i)
            h = conv_ops.conv2d(h, w, strides=[1, 1, 1, 1], padding="SAME")
            h = tf.nn.relu(h + _bias(c_out, "b"))
            h = pooling_ops.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    h = tf.reshape(h, [-1, 2 * 2 * 64])
    with tf.name_scope("dense"):
        h = tf.nn.relu(tf.matmul(h, _weight([256, 128], "w", seed + 5)) + _bias(128, "b"))
    with tf.name_scope("logits"):
        return tf.matmul(h, _weight([128, 10], "w", seed + 9)) + _bias(10, "b")


def train(model_name: str, epochs: int, batch_size: int, lr: float, seed: int) -> float:
    x_train, x_test, y_train, y_test = load_data(seed)
    graph = tf.Graph()
    with graph.as_default():
        images = tf.placeholder(tf.float32, [None, 8, 8, 1], name="images")
        labels = tf.placeholder(tf.int32, [None], name="labels")
        logits = {"mlp": mlp, "cnn": cnn}[model_name](images, seed)
        loss = tf.reduce_mean(
            nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        global_step = get_or_create_global_step()
        train_op = AdamOptimizer(lr).minimize(loss, global_step=global_step)
        predictions = tf.argmax(logits, 1, output_type=tf.int32)
        init = tf.global_variables_initializer()

    rng = np.random.RandomState(seed)
    steps_per_epoch = int(np.ceil(len(x_train) / batch_size))
    start = time.perf_counter()
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        bar = tqdm(total=epochs * steps_per_epoch, desc=f"{model_name:>3}", unit="step")
        for epoch in range(epochs):
            order = rng.permutation(len(x_train))
            for k in range(steps_per_epoch):
                idx = order[k * batch_size : (k + 1) * batch_size]
                feed = {images: x_train[idx], labels: y_train[idx]}
                loss_value, _ = sess.run([loss, train_op], feed)
                bar.update()
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss_value:.4f}")
        bar.close()
        predicted = sess.run(predictions, {images: x_test})
        steps = sess.run(global_step)
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
    args = parser.parse_args()
    models = ["mlp", "cnn"] if args.model == "both" else [args.model]
    for name in models:
        train(name, args.epochs, args.batch_size, args.lr, args.seed)


if __name__ == "__main__":
    main()
