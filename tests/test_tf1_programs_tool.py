"""tools/tf1_programs.py: the caps it writes into a program's text, its MNIST stand-in
(TF1's DataSet shapes, dtypes and next_batch epoch semantics), and one program run
through its asyncflow name map."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_TOOL = os.path.join(os.path.dirname(__file__), "..", "tools", "tf1_programs.py")


def _tool():
    spec = importlib.util.spec_from_file_location("tf1_programs", _TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_caps_rewrite_only_the_named_constants_and_long_literal_loops():
    src = textwrap.dedent(
        """\
        num_steps = 30000
        training_iters = 100000
        training_epochs = 25
        display_step = 1000
        for i in range(100):
            pass
        for j in range(start, 100):
            pass
        for k in range(10):
            pass
        """
    )
    out = _tool().cap_source(src, max_steps=200, max_epochs=2)
    assert "num_steps = min(30000, 200)" in out
    assert "training_iters = min(100000, 25600)" in out
    assert "training_epochs = min(25, 2)" in out
    assert "display_step = 1000" in out
    assert "range(min(100, 2))" in out and "range(start, min(100, 2))" in out
    assert "range(10)" in out
    assert _tool().cap_source(src, None, None) == src


def test_mnist_stand_in_has_tf1_shapes_dtypes_and_epoch_semantics(monkeypatch):
    monkeypatch.setenv("TF1P_TRAIN_EXAMPLES", "300")
    input_data = _tool()._mnist_module()
    mnist = input_data.read_data_sets("/unused", one_hot=True)
    assert mnist.train.images.shape == (300, 784) and mnist.train.images.dtype == np.float32
    assert mnist.train.labels.shape == (300, 10) and mnist.train.labels.dtype == np.float64
    assert mnist.validation.num_examples == 5000 and mnist.test.num_examples == 10000
    assert 0.0 <= mnist.train.images.min() and mnist.train.images.max() <= 1.0
    np.testing.assert_array_equal(mnist.train.labels.sum(1), 1.0)
    plain = input_data.read_data_sets("/unused", reshape=False)
    assert plain.test.images.shape == (10000, 28, 28, 1) and plain.test.labels.dtype == np.uint8
    # An epoch is every example once; a batch across the boundary is the rest of the
    # epoch followed by the start of the next, as TF1's DataSet.next_batch.
    seen = [mnist.train.next_batch(128)[0] for _ in range(2)]
    assert mnist.train.epochs_completed == 0
    xs, ys = mnist.train.next_batch(128)
    assert xs.shape == (128, 784) and ys.shape == (128, 10)
    assert mnist.train.epochs_completed == 1
    first_epoch = np.concatenate(seen + [xs[:44]])
    assert len({row.tobytes() for row in first_epoch}) == len(
        {row.tobytes() for row in mnist.train.images}
    )
    # Learnable: the nearest class mean classifies most test images.
    means = np.stack(
        [mnist.train.images[mnist.train.labels[:, k] == 1].mean(0) for k in range(10)]
    )
    test = input_data.read_data_sets("/unused", one_hot=False).test
    pred = ((test.images[:500, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (pred == test.labels[:500]).mean() > 0.5


@pytest.mark.timeout(300)
def test_a_tutorial_shaped_program_runs_through_the_asyncflow_map(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        textwrap.dedent(
            """\
            import tensorflow as tf
            from tensorflow.contrib import rnn
            from tensorflow.examples.tutorials.mnist import input_data
            import matplotlib.pyplot as plt
            mnist = input_data.read_data_sets("/tmp/data/", one_hot=True)
            num_steps = 1000
            x = tf.placeholder("float", [None, 28, 28])
            y = tf.placeholder("float", [None, 10])
            cell = rnn.BasicLSTMCell(8)
            outs, _ = rnn.static_rnn(cell, tf.unstack(x, 28, 1), dtype=tf.float32)
            w = tf.Variable(tf.zeros([8, 10]))
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
                logits=tf.matmul(outs[-1], w), labels=y))
            train = tf.train.AdamOptimizer(0.01).minimize(loss)
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for step in range(num_steps):
                    bx, by = mnist.train.next_batch(16)
                    _, l = sess.run([train, loss], {x: bx.reshape(16, 28, 28), y: by})
                print("steps", step + 1, "loss", l)
            f, a = plt.subplots(2, 10)
            a[1][3].imshow(bx[0])
            plt.waitforbuttonpress()
            """
        )
    )
    env = dict(os.environ, TF1P_TRAIN_EXAMPLES="200")
    out = subprocess.run(
        [sys.executable, _TOOL, "--child", "asyncflow", str(prog), "--max-steps", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:2] == ["steps", "3"]
