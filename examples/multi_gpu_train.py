"""TF1 multi-GPU tower training: one model replica per GPU, shared variables on the CPU,
gradients averaged across towers, one update per step.

Each tower takes its slice of the batch on its own GPU (`with tf.device("/gpu:i")`),
reusing the variables that live on the CPU (`tf.variable_scope(..., reuse=...)`);
`average_gradients` averages every variable's gradients over the towers, and one
`apply_gradients` updates the shared variables.  With equal slices this is exactly the
gradient of the whole batch's mean loss, so the run must match a single-device run of
the same model on the whole batch, step for step.

    python examples/multi_gpu_train.py                         # the GPUs this machine has
    ASYNCFLOW_FAKE_GPUS=2 python examples/multi_gpu_train.py   # two stand-in GPUs (CI)

Without any GPU the towers run on the CPU (soft placement), which still shows the
program; the point of the example is two GPUs.
"""

from __future__ import annotations

import sys

import numpy as np

import asyncflow as tf

BATCH, FEATURES, HIDDEN, CLASSES = 64, 20, 32, 4
STEPS = 8
LEARNING_RATE = 0.5


def _model(x, labels):
    """A two-layer MLP's mean loss; its variables are created (or reused) on the CPU."""
    with tf.device("/cpu:0"):
        w1 = tf.get_variable(
            "w1", [FEATURES, HIDDEN], initializer=tf.glorot_uniform_initializer(seed=1)
        )
        b1 = tf.get_variable("b1", [HIDDEN], initializer=tf.zeros_initializer())
        w2 = tf.get_variable(
            "w2", [HIDDEN, CLASSES], initializer=tf.glorot_uniform_initializer(seed=2)
        )
        b2 = tf.get_variable("b2", [CLASSES], initializer=tf.zeros_initializer())
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(h, w2) + b2
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )


def average_gradients(tower_grads):
    """[[(grad, var), ...] per tower] -> [(mean grad, var), ...] (TF1's cifar10 helper)."""
    averaged = []
    for grads_and_vars in zip(*tower_grads):
        grads = [tf.expand_dims(g, 0) for g, _ in grads_and_vars]
        mean = tf.reduce_mean(tf.concat(grads, 0), 0)
        averaged.append((mean, grads_and_vars[0][1]))
    return averaged


def build(num_towers: int):
    x = tf.placeholder(tf.float32, [BATCH, FEATURES], name="x")
    labels = tf.placeholder(tf.int32, [BATCH], name="labels")
    opt = tf.train.GradientDescentOptimizer(LEARNING_RATE)
    if num_towers == 0:  # the single-device reference: the whole batch, on the CPU
        with tf.device("/cpu:0"), tf.variable_scope("model"):
            loss = _model(x, labels)
        return x, labels, loss, opt.minimize(loss)
    xs = tf.split(x, num_towers)
    ys = tf.split(labels, num_towers)
    tower_grads, losses = [], []
    for i in range(num_towers):
        with tf.device(f"/gpu:{i}"), tf.name_scope(f"tower_{i}"):
            with tf.variable_scope("model", reuse=i > 0):
                loss = _model(xs[i], ys[i])
            losses.append(loss)
            tower_grads.append(opt.compute_gradients(loss))
    with tf.device("/cpu:0"):
        train = opt.apply_gradients(average_gradients(tower_grads))
        loss = tf.add_n(losses) / float(num_towers)
    return x, labels, loss, train


def train(num_towers: int, log_placement=False) -> tuple[list[float], list[np.ndarray]]:
    """STEPS training steps; the losses and the final variables."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((STEPS, BATCH, FEATURES)).astype(np.float32)
    targets = (np.abs(data[..., :CLASSES]).argmax(-1)).astype(np.int32)
    graph = tf.Graph()
    with graph.as_default():
        x, labels, loss, train_op = build(num_towers)
        init = tf.global_variables_initializer()
        variables = tf.global_variables()
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=log_placement)
    losses = []
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for step in range(STEPS):
            value, _ = sess.run([loss, train_op], {x: data[step], labels: targets[step]})
            losses.append(float(value))
        return losses, sess.run(variables)


def num_gpus() -> int:
    return sum(d.device_type == "GPU" for d in tf.device_lib.list_local_devices())


def main() -> int:
    towers = max(num_gpus(), 1)
    single, single_vars = train(0)
    multi, multi_vars = train(towers)
    print(f"{'step':>4} {'single device':>14} {f'{towers} towers':>14}")
    for step, (a, b) in enumerate(zip(single, multi, strict=True)):
        print(f"{step:>4} {a:>14.6f} {b:>14.6f}")
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(single_vars, multi_vars, strict=True))
    print(f"largest variable difference after {STEPS} steps: {worst:.2e}")
    ok = np.allclose(single, multi, rtol=1e-5) and worst < 1e-5
    print("match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
