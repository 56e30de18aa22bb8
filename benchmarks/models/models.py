"""Model training steps, the same TF1 code under asyncflow or TensorFlow (issue 21).

    .venv/bin/python benchmarks/models/models.py --backend asyncflow --model autoencoder
    /work/tfvenv/bin/python benchmarks/models/models.py --backend tf --model autoencoder

Prints one JSON line: the median and minimum step time over `--steps` timed steps after
`--warmup` untimed ones (each step feeds a fresh batch, as a tutorial's loop does) and
the CPU time per step of the whole process.  `run_models.py` runs every model under both
backends, alternating, and prints the table of ratios.

The models are the tutorial programs the issue measured, at their shapes: the sigmoid
autoencoder (784-256-128, RMSProp, batch 256), a VAE (784-512-20), a GAN (two
optimizers; gan_b32: the GAN tutorial's own step, at its batch of 32), an LSTM over 28
unrolled steps (static_rnn, 128 hidden, batch 128) and its dynamic_rnn form, a
bidirectional LSTM (static_bidirectional_rnn, 128 hidden each way), the dynamic_rnn
tutorial's static_rnn with a sequence_length per row (20 steps, 64 hidden), the ReLU MLP
(784-512-512-10, SGD, batch 128), the LeNet CNN (two 5x5 convolutions of 32 and 64
channels with 2x2 max pooling, 1024 dense, batch 64, Adam), and Adam / RMSProp /
Momentum applied to ~1M parameters.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def _tf(backend: str):
    if backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import asyncflow as tf
    from asyncflow.ops import blas, cnn_jit, eigen_reduce_jit, fused_updates

    fused_updates.warm()  # the compiled optimizer loops, before any timing
    eigen_reduce_jit.warm()  # (and TF's order of sums: Sum, BiasAddGrad)
    blas.warm()  # (and the compiled gemm call)
    cnn_jit.warm()  # (and the compiled 2x2 max pooling)
    cnn_jit.warm_conv(5, 5, 1, 32, pool=True)  # (and the CNN's first convolution)
    return tf


def autoencoder(tf, rng):
    x = tf.placeholder(tf.float32, [None, 784])

    def dense(h, n_in, n_out, name):
        w = tf.Variable(rng.standard_normal((n_in, n_out)).astype(np.float32) * 0.05, name=name)
        b = tf.Variable(np.zeros(n_out, np.float32), name=name + "_b")
        return tf.nn.sigmoid(tf.matmul(h, w) + b)

    enc = dense(dense(x, 784, 256, "e1"), 256, 128, "e2")
    dec = dense(dense(enc, 128, 256, "d1"), 256, 784, "d2")
    loss = tf.reduce_mean(tf.pow(x - dec, 2))
    train = tf.train.RMSPropOptimizer(0.01).minimize(loss)
    return [x], train, loss, lambda: [rng.random((256, 784), np.float32)]


def vae(tf, rng):
    x = tf.placeholder(tf.float32, [None, 784])
    eps = tf.placeholder(tf.float32, [None, 20])

    def var(shape, name):
        return tf.Variable(rng.standard_normal(shape).astype(np.float32) * 0.05, name=name)

    h = tf.nn.tanh(tf.matmul(x, var((784, 512), "h")) + var((512,), "hb"))
    mean = tf.matmul(h, var((512, 20), "m")) + var((20,), "mb")
    log_std = tf.matmul(h, var((512, 20), "s")) + var((20,), "sb")
    z = mean + tf.exp(log_std) * eps
    dh = tf.nn.tanh(tf.matmul(z, var((20, 512), "dh")) + var((512,), "dhb"))
    logits = tf.matmul(dh, var((512, 784), "o")) + var((784,), "ob")
    rec = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=x, logits=logits), 1)
    kl = -0.5 * tf.reduce_sum(1 + 2 * log_std - tf.square(mean) - tf.exp(2 * log_std), 1)
    loss = tf.reduce_mean(rec + kl)
    train = tf.train.RMSPropOptimizer(0.001).minimize(loss)
    return (
        [x, eps],
        train,
        loss,
        lambda: [
            rng.random((64, 784), np.float32),
            rng.standard_normal((64, 20)).astype(np.float32),
        ],
    )


def _gan_inputs(tf, rng):
    """The GANs' placeholders (noise, real images) and the generator's and the
    discriminator's variables (weight, bias, weight, bias)."""
    z = tf.placeholder(tf.float32, [None, 100])
    real = tf.placeholder(tf.float32, [None, 784])

    def var(shape, name):
        return tf.Variable(rng.standard_normal(shape).astype(np.float32) * 0.05, name=name)

    g_vars = [var((100, 256), "g1"), var((256,), "g1b"), var((256, 784), "g2"), var((784,), "g2b")]
    d_vars = [var((784, 256), "d1"), var((256,), "d1b"), var((256, 1), "d2"), var((1,), "d2b")]
    return z, real, g_vars, d_vars


def gan(tf, rng):
    z, real, g_vars, d_vars = _gan_inputs(tf, rng)

    def gen(x):
        h = tf.nn.relu(tf.matmul(x, g_vars[0]) + g_vars[1])
        return tf.nn.sigmoid(tf.matmul(h, g_vars[2]) + g_vars[3])

    def disc(x):
        h = tf.nn.relu(tf.matmul(x, d_vars[0]) + d_vars[1])
        return tf.nn.sigmoid(tf.matmul(h, d_vars[2]) + d_vars[3])

    fake = gen(z)
    d_real, d_fake = disc(real), disc(fake)
    g_loss = -tf.reduce_mean(tf.log(d_fake + 1e-8))
    d_loss = -tf.reduce_mean(tf.log(d_real + 1e-8) + tf.log(1.0 - d_fake + 1e-8))
    g_train = tf.train.AdamOptimizer(2e-4).minimize(g_loss, var_list=g_vars)
    d_train = tf.train.AdamOptimizer(2e-4).minimize(d_loss, var_list=d_vars)
    return (
        [z, real],
        [g_train, d_train],
        g_loss,
        lambda: [
            rng.uniform(-1, 1, (128, 100)).astype(np.float32),
            rng.random((128, 784), np.float32),
        ],
    )


def gan_b32(tf, rng):
    """The GAN tutorial program's own step (gan.py): its batch of 32, Adam at 0.001, the
    losses without an epsilon, both losses fetched beside both updates every step."""
    z, real, g_vars, d_vars = _gan_inputs(tf, rng)

    def layers(x, w):
        h = tf.nn.relu(tf.add(tf.matmul(x, w[0]), w[1]))
        return tf.nn.sigmoid(tf.add(tf.matmul(h, w[2]), w[3]))

    d_real, d_fake = layers(real, d_vars), layers(layers(z, g_vars), d_vars)
    g_loss = -tf.reduce_mean(tf.log(d_fake))
    d_loss = -tf.reduce_mean(tf.log(d_real) + tf.log(1.0 - d_fake))
    g_train = tf.train.AdamOptimizer(learning_rate=0.001).minimize(g_loss, var_list=g_vars)
    d_train = tf.train.AdamOptimizer(learning_rate=0.001).minimize(d_loss, var_list=d_vars)
    return (
        [z, real],
        [g_train, d_train, g_loss, d_loss],
        g_loss,
        lambda: [
            rng.uniform(-1, 1, (32, 100)).astype(np.float32),
            rng.random((32, 784), np.float32),
        ],
    )


def _lstm(tf, rng, dynamic: bool):
    x = tf.placeholder(tf.float32, [None, 28, 28])
    y = tf.placeholder(tf.int64, [None])
    cell = tf.nn.rnn_cell.BasicLSTMCell(128)
    if dynamic:
        outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        last = outputs[:, -1]
    else:
        outputs, _ = tf.nn.static_rnn(cell, tf.unstack(x, 28, 1), dtype=tf.float32)
        last = outputs[-1]
    return _sequence_classifier(tf, rng, x, y, last, 128)


def _sequence_classifier(tf, rng, x, y, features, width):
    """The RNN tutorials' head: a 10-way softmax on the last output, Adam, batch 128."""
    w = tf.Variable(rng.standard_normal((width, 10)).astype(np.float32) * 0.05)
    b = tf.Variable(np.zeros(10, np.float32))
    logits = tf.matmul(features, w) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(0.001).minimize(loss)
    return (
        [x, y],
        train,
        loss,
        lambda: [rng.random((128, 28, 28), np.float32), rng.integers(0, 10, 128)],
    )


def lstm_static(tf, rng):
    return _lstm(tf, rng, dynamic=False)


def lstm_dynamic(tf, rng):
    return _lstm(tf, rng, dynamic=True)


def bilstm(tf, rng):
    """The tutorial's bidirectional LSTM: 28 unrolled steps each way, 128 hidden, batch 128."""
    x = tf.placeholder(tf.float32, [None, 28, 28])
    y = tf.placeholder(tf.int64, [None])
    fw, bw = tf.nn.rnn_cell.BasicLSTMCell(128), tf.nn.rnn_cell.BasicLSTMCell(128)
    outputs, _, _ = tf.nn.static_bidirectional_rnn(fw, bw, tf.unstack(x, 28, 1), dtype=tf.float32)
    return _sequence_classifier(tf, rng, x, y, outputs[-1], 256)


def lstm_seqlen(tf, rng):
    """The dynamic_rnn tutorial (aymericdamien's dynamic_rnn.py): static_rnn over 20 steps
    with a `sequence_length` per row (its Selects keep finished rows' outputs at zero and
    their states as they were), 64 hidden, batch 128, the output at each row's last step
    gathered, two classes, gradient descent."""
    steps, hidden = 20, 64
    x = tf.placeholder(tf.float32, [None, steps, 1])
    y = tf.placeholder(tf.float32, [None, 2])
    seqlen = tf.placeholder(tf.int32, [None])
    cell = tf.nn.rnn_cell.BasicLSTMCell(hidden)
    outputs, _ = tf.nn.static_rnn(
        cell, tf.unstack(x, steps, 1), dtype=tf.float32, sequence_length=seqlen
    )
    outputs = tf.transpose(tf.stack(outputs), [1, 0, 2])
    index = tf.range(0, tf.shape(outputs)[0]) * steps + (seqlen - 1)
    last = tf.gather(tf.reshape(outputs, [-1, hidden]), index)
    w = tf.Variable(rng.standard_normal((hidden, 2)).astype(np.float32))
    b = tf.Variable(rng.standard_normal(2).astype(np.float32))
    logits = tf.matmul(last, w) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=y))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)

    def batch():
        lengths = rng.integers(3, steps + 1, 128)
        values = rng.random((128, steps, 1), np.float32)
        values[np.arange(steps)[None, :] >= lengths[:, None]] = 0.0  # (padded, as its data)
        labels = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 128)]
        return [values, labels, lengths.astype(np.int32)]

    return [x, y, seqlen], train, loss, batch


def cnn(tf, rng):
    """LeNet as the tutorial CNN and benchmarks/conv_bench.py --full build it, with Adam."""
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.placeholder(tf.int64, [None])

    def var(shape, scale):
        return tf.Variable(rng.normal(0, scale, shape).astype(np.float32))

    def conv_pool(h, w, b):
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, [1, 1, 1, 1], "SAME"), b))
        return tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")

    h = conv_pool(x, var([5, 5, 1, 32], 0.1), var([32], 0.1))
    h = conv_pool(h, var([5, 5, 32, 64], 0.03), var([64], 0.1))
    h = tf.reshape(h, [-1, 7 * 7 * 64])
    h = tf.nn.relu(tf.matmul(h, var([7 * 7 * 64, 1024], 0.01)) + var([1024], 0.01))
    logits = tf.matmul(h, var([1024, 10], 0.03)) + var([10], 0.01)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(1e-4).minimize(loss)
    return (
        [x, y],
        train,
        loss,
        lambda: [rng.random((64, 28, 28, 1), np.float32), rng.integers(0, 10, 64)],
    )


def mlp(tf, rng):
    x = tf.placeholder(tf.float32, [None, 784])
    y = tf.placeholder(tf.int64, [None])
    h = x
    for n_in, n_out in ((784, 512), (512, 512)):
        w = tf.Variable(rng.standard_normal((n_in, n_out)).astype(np.float32) * 0.05)
        h = tf.nn.relu(tf.matmul(h, w) + tf.Variable(np.zeros(n_out, np.float32)))
    w = tf.Variable(rng.standard_normal((512, 10)).astype(np.float32) * 0.05)
    logits = tf.matmul(h, w) + tf.Variable(np.zeros(10, np.float32))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return (
        [x, y],
        train,
        loss,
        lambda: [rng.random((128, 784), np.float32), rng.integers(0, 10, 128)],
    )


def _optimizer_only(make):
    def build(tf, rng):
        ws = [tf.Variable(rng.standard_normal((1000, 1000)).astype(np.float32) * 0.01)]
        g = tf.placeholder(tf.float32, [1000, 1000])
        train = make(tf).apply_gradients([(g, ws[0])])
        return [g], train, None, lambda: [rng.standard_normal((1000, 1000)).astype(np.float32)]

    return build


MODELS = {
    "autoencoder": autoencoder,
    "vae": vae,
    "gan": gan,
    "gan_b32": gan_b32,
    "lstm_static": lstm_static,
    "lstm_dynamic": lstm_dynamic,
    "bilstm": bilstm,
    "lstm_seqlen": lstm_seqlen,
    "mlp": mlp,
    "cnn": cnn,
    "adam_1m": _optimizer_only(lambda tf: tf.train.AdamOptimizer(0.001)),
    "rmsprop_1m": _optimizer_only(lambda tf: tf.train.RMSPropOptimizer(0.001)),
    "momentum_1m": _optimizer_only(lambda tf: tf.train.MomentumOptimizer(0.01, 0.9)),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncflow", "tf"], required=True)
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument(
        "--no-fusion", action="store_true", help="asyncflow without the element-wise fusion pass"
    )
    args = ap.parse_args(argv)
    tf = _tf(args.backend)
    if args.no_fusion and args.backend == "asyncflow":
        from asyncflow import graph_passes
        from asyncflow.ops import fused_elementwise

        graph_passes.GRAPH_PASSES.remove(fused_elementwise.fuse_elementwise)
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        feeds, train, loss, batch = MODELS[args.model](tf, rng)
        init = tf.global_variables_initializer()
    config = None
    if args.backend == "tf":
        config = tf.ConfigProto(
            intra_op_parallelism_threads=os.cpu_count(), inter_op_parallelism_threads=2
        )
    batches = [batch() for _ in range(8)]  # made before timing: only the step is timed
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        times = []
        cpu0 = time.process_time()
        for k in range(args.warmup + args.steps):
            if k == args.warmup:
                if args.backend == "asyncflow":  # the fused programs' compiled loops
                    from asyncflow.ops import fused_elementwise_jit

                    fused_elementwise_jit.wait()
                cpu0 = time.process_time()
            feed = dict(zip(feeds, batches[k % len(batches)]))
            t0 = time.perf_counter()
            sess.run(train, feed)
            times.append(time.perf_counter() - t0)
        cpu = (time.process_time() - cpu0) / args.steps
        final = float(sess.run(loss, feed)) if loss is not None else None
        # The nodes one training step runs (TF's after grappler), from a traced step.
        meta = tf.RunMetadata()
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        sess.run(train, feed, options=opts, run_metadata=meta)
        nodes = sum(len(d.node_stats) for d in meta.step_stats.dev_stats)
    timed = times[args.warmup :]
    print(
        json.dumps(
            {
                "backend": args.backend,
                "model": args.model,
                "median_ms": statistics.median(timed) * 1e3,
                "min_ms": min(timed) * 1e3,
                "cpu_ms": cpu * 1e3,
                "loss": final,
                "nodes": nodes,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
