"""Programs in the shape of the classic TF1 tutorials (issue 18's "tutorial programs
that run on TF run here unchanged"): each is the whole script a tutorial reader types,
written here from scratch with deterministic data and initialisers (constant or
seeded NumPy values fed as initial values, so no TF random stream is involved).

Each exercises what broke such programs: dropout with a `keep_prob` placeholder of
unknown shape before softmax_cross_entropy_with_logits; reduce_sum over an
unknown-rank placeholder fed scalars (the linear-regression tutorial); minimize with
var_list a dict's values(); tf.arg_max / arg_min; a name-scoped MLP with a saver
round trip; a queue-fed input pipeline with a Coordinator and QueueRunners.
"""

import os
import tempfile

import numpy as np

_RNG = np.random.RandomState(18)
_X = _RNG.rand(12, 4).astype(np.float32)
_Y = np.eye(3, dtype=np.float32)[_RNG.randint(0, 3, 12)]
_W1 = (_RNG.rand(4, 5).astype(np.float32) - 0.5) * 0.4
_W2 = (_RNG.rand(5, 3).astype(np.float32) - 0.5) * 0.4


def tutorial_softmax_dropout(tf):
    """MNIST-for-experts shape: an MLP, dropout(keep_prob placeholder), softmax xent,
    Adam, accuracy by arg_max; keep_prob 1.0 so the numbers are deterministic."""
    x = tf.placeholder(tf.float32, [None, 4])
    y_ = tf.placeholder(tf.float32, [None, 3])
    keep_prob = tf.placeholder(tf.float32)
    w1 = tf.Variable(_W1)
    b1 = tf.Variable(tf.constant(0.1, shape=[5]))
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    h_drop = tf.nn.dropout(h, keep_prob)
    w2 = tf.Variable(_W2)
    b2 = tf.Variable(tf.zeros([3]))
    logits = tf.matmul(h_drop, w2) + b2
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=logits))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    correct = tf.equal(tf.arg_max(logits, 1), tf.arg_max(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(15):
            _, value = sess.run([train, loss], {x: _X, y_: _Y, keep_prob: 1.0})
            losses.append(value)
        acc = sess.run(accuracy, {x: _X, y_: _Y, keep_prob: 1.0})
        lowest = sess.run(tf.arg_min(logits, 1), {x: _X[:4], keep_prob: 1.0})
    return {
        "h_drop_shape": str(h_drop.shape),
        "logits_shape": str(logits.shape),
        "losses": losses,
        "accuracy": acc,
        "arg_min": lowest,
    }


def tutorial_linear_regression(tf):
    """The linear-regression tutorial: scalar placeholders fed one sample at a time,
    reduce_sum over an unknown-rank placeholder, SGD, epochs of plain floats."""
    xs = np.linspace(-1.0, 1.0, 11)
    ys = 2.0 * xs + 0.5 + 0.1 * np.sin(7 * xs)
    X = tf.placeholder("float")
    Y = tf.placeholder("float")
    W = tf.Variable(0.3, name="weight")
    b = tf.Variable(-0.2, name="bias")
    pred = tf.add(tf.multiply(X, W), b)
    cost = tf.reduce_sum(tf.pow(pred - Y, 2)) / (2 * len(xs))
    opt = tf.train.GradientDescentOptimizer(0.5).minimize(cost)
    costs = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            for a, c in zip(xs, ys):
                sess.run(opt, feed_dict={X: a, Y: c})
            costs.append(sess.run(cost, feed_dict={X: xs, Y: ys}))
        return {"costs": costs, "W": sess.run(W), "b": sess.run(b)}


def tutorial_var_list_dict_values(tf):
    """Two-tower training where each optimizer gets var_list=dict.values()."""
    x = tf.constant(_X)
    towers = {
        "a": tf.Variable(np.full([4, 1], 0.2, np.float32), name="a"),
        "b": tf.Variable(np.full([4, 1], -0.1, np.float32), name="b"),
    }
    y = tf.matmul(x, towers["a"]) - tf.matmul(x, towers["b"])
    loss = tf.reduce_mean(tf.square(y - 1.0))
    step = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss, var_list=towers.values())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        losses = [sess.run([step, loss])[1] for _ in range(6)]
        return {"losses": losses, "a": sess.run(towers["a"])}


def tutorial_mlp_saver(tf):
    """Name-scoped layers, a saver round trip into a fresh graph, restored values
    evaluated through the restored graph's tensors by name."""
    d = tempfile.mkdtemp()
    path = os.path.join(d, "model.ckpt")
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        with tf.name_scope("hidden"):
            w = tf.Variable(_W1, name="weights")
            h = tf.nn.sigmoid(tf.matmul(x, w), name="h")
        with tf.name_scope("out"):
            v = tf.Variable(_W2, name="weights")
            out = tf.identity(tf.matmul(h, v), name="logits")
        loss = tf.reduce_sum(tf.square(out))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(train, {x: _X})
            before = sess.run(out, {x: _X[:2]})
            saved = saver.save(sess, path, global_step=3)
    with tf.Graph().as_default() as g:
        restorer = tf.train.import_meta_graph(saved + ".meta")
        with tf.Session() as sess:
            restorer.restore(sess, saved)
            after = sess.run("out/logits:0", {"x:0": _X[:2]})
            names = sorted(v.op.name for v in g.get_collection("variables"))
    return {
        "before": before,
        "after": after,
        "names": names,
        "ckpt": os.path.basename(saved),
        "latest": os.path.basename(tf.train.latest_checkpoint(d)),
    }


def tutorial_queue_pipeline(tf):
    """The reading-data tutorial: string_input_producer (no shuffling), TextLineReader,
    decode_csv, batch, Coordinator and start_queue_runners; epochs end in
    OutOfRangeError."""
    d = tempfile.mkdtemp()
    files = []
    for i in range(2):
        files.append(os.path.join(d, f"part{i}.csv"))
        with open(files[-1], "w") as f:
            for j in range(3):
                f.write(f"{i * 10 + j},{j * 0.5}\n")
    queue = tf.train.string_input_producer(files, num_epochs=1, shuffle=False)
    _, line = tf.TextLineReader().read(queue)
    a, b = tf.decode_csv(line, [[0], [0.0]])
    batch = tf.train.batch([a, b], batch_size=2, allow_smaller_final_batch=True)
    got = []
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while not coord.should_stop():
                got.append(sess.run(batch))
        except tf.errors.OutOfRangeError:
            pass
        finally:
            coord.request_stop()
        coord.join(threads)
    return {"batches": got}


PROGRAMS = [
    tutorial_softmax_dropout,
    tutorial_linear_regression,
    tutorial_var_list_dict_values,
    tutorial_mlp_saver,
    tutorial_queue_pipeline,
]
