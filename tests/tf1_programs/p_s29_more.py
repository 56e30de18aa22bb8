"""More tutorial shaped TF1 programs (session 29): batch norm written by hand (moments,
an EMA of the population statistics and tf.cond on a training flag), a DCGAN-style pair
of optimizers over variable scopes with conv2d_transpose, a bag-of-words classifier
(string_split, a lookup table, embedding_lookup_sparse), a user-defined RNNCell under
dynamic_rnn, resuming training from import_meta_graph through a collection,
cifar10_eval's in_top_k with a RegisterGradient override, and Supervisor."""

import os
import tempfile

import numpy as np


def s29_batch_norm_by_hand(tf):
    """The 'batch normalization from scratch' tutorial: tf.nn.moments, an EMA of mean and
    variance applied under control_dependencies inside tf.cond(is_training), then
    tf.nn.batch_normalization with the batch or the averaged statistics."""
    rng = np.random.RandomState(21)
    x_val = rng.rand(5, 3).astype(np.float32) * 2.0
    x = tf.placeholder(tf.float32, [None, 3])
    is_training = tf.placeholder(tf.bool, [])
    beta = tf.Variable(tf.zeros([3]), name="beta")
    gamma = tf.Variable(tf.ones([3]), name="gamma")
    batch_mean, batch_var = tf.nn.moments(x, [0], name="moments")
    ema = tf.train.ExponentialMovingAverage(decay=0.5)

    def mean_var_with_update():
        ema_apply = ema.apply([batch_mean, batch_var])
        with tf.control_dependencies([ema_apply]):
            return tf.identity(batch_mean), tf.identity(batch_var)

    mean, var = tf.cond(
        is_training,
        mean_var_with_update,
        lambda: (ema.average(batch_mean), ema.average(batch_var)),
    )
    normed = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        train_out = [sess.run(normed, {x: x_val * (i + 1), is_training: True}) for i in range(2)]
        test_out = sess.run(normed, {x: x_val[:2], is_training: False})
        shadows = sess.run([ema.average(batch_mean), ema.average(batch_var)])
    return {
        "train": train_out,
        "test": test_out,
        "shadows": shadows,
        "names": sorted(v.op.name for v in tf.global_variables()),
        "mean_name": mean.name,
    }


def s29_gan_two_optimizers(tf):
    """DCGAN shape: a generator (dense, reshape, conv2d_transpose, tanh) and a
    discriminator (conv2d, leaky_relu, dense) in variable scopes, the discriminator
    built twice with reuse; each Adam minimizes over its own scope's trainables."""
    rng = np.random.RandomState(22)
    z = tf.constant(rng.rand(2, 3).astype(np.float32) - 0.5)
    real = tf.constant(rng.rand(2, 4, 4, 1).astype(np.float32))
    init = tf.random_uniform_initializer(-0.2, 0.2, seed=8)

    def generator(z):
        with tf.variable_scope("gen"):
            h = tf.layers.dense(z, 2 * 2 * 4, kernel_initializer=init)
            h = tf.reshape(h, [-1, 2, 2, 4])
            h = tf.layers.conv2d_transpose(
                h, 1, 3, strides=2, padding="same", kernel_initializer=init
            )
            return tf.tanh(h)

    def discriminator(x, reuse=False):
        with tf.variable_scope("disc", reuse=reuse):
            h = tf.layers.conv2d(x, 2, 3, strides=2, padding="same", kernel_initializer=init)
            h = tf.nn.leaky_relu(h, alpha=0.2)
            return tf.layers.dense(tf.layers.flatten(h), 1, kernel_initializer=init)

    fake = generator(z)
    d_real = discriminator(real)
    d_fake = discriminator(fake, reuse=True)
    xent = tf.nn.sigmoid_cross_entropy_with_logits
    d_loss = tf.reduce_mean(xent(logits=d_real, labels=tf.ones_like(d_real))) + tf.reduce_mean(
        xent(logits=d_fake, labels=tf.zeros_like(d_fake))
    )
    g_loss = tf.reduce_mean(xent(logits=d_fake, labels=tf.ones_like(d_fake)))
    t_vars = tf.trainable_variables()
    d_vars = [v for v in t_vars if v.name.startswith("disc/")]
    g_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="gen")
    d_opt = tf.train.AdamOptimizer(0.01, beta1=0.5).minimize(d_loss, var_list=d_vars)
    g_opt = tf.train.AdamOptimizer(0.01, beta1=0.5).minimize(g_loss, var_list=g_vars)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        losses = []
        for _ in range(2):
            _, dl = sess.run([d_opt, d_loss])
            _, gl = sess.run([g_opt, g_loss])
            losses.append([dl, gl])
        sample = sess.run(fake)
    return {
        "losses": losses,
        "sample": sample,
        "d_vars": [v.op.name for v in d_vars],
        "g_vars": [v.op.name for v in g_vars],
        "fake_shape": str(fake.shape),
        "slots": sorted(v.op.name for v in tf.global_variables() if "Adam" in v.op.name),
    }


def s29_bag_of_words_classifier(tf):
    """Text classification: tf.string_split of raw sentences, a vocabulary lookup table
    (StaticVocabularyTable, one OOV bucket), embedding_lookup_sparse with the mean
    combiner, a softmax layer trained a few steps; tables_initializer."""
    sentences = tf.constant(["the cat sat", "a dog ran far", "the dog", "zebra sat"])
    labels = tf.constant([0, 1, 1, 0])
    vocab = tf.constant(["the", "cat", "sat", "a", "dog", "ran"])
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(vocab, tf.range(6, dtype=tf.int64)), num_oov_buckets=1
    )
    words = tf.string_split(sentences)
    ids = tf.SparseTensor(words.indices, table.lookup(words.values), words.dense_shape)
    emb = tf.Variable(np.linspace(-1.0, 1.0, 7 * 3, dtype=np.float32).reshape(7, 3))
    doc = tf.nn.embedding_lookup_sparse(emb, ids, None, combiner="mean")
    w = tf.Variable(np.full([3, 2], 0.1, np.float32))
    logits = tf.matmul(doc, w)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train = tf.train.AdagradOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.tables_initializer()])
        tokens = sess.run(ids)
        losses = [sess.run([train, loss])[1] for _ in range(3)]
        docs = sess.run(doc)
    return {
        "ids": [tokens.indices, tokens.values, tokens.dense_shape],
        "losses": losses,
        "docs": docs,
        "doc_shape": str(doc.shape),
    }


def s29_custom_rnn_cell(tf):
    """A user-defined tf.nn.rnn_cell.RNNCell subclass (a leaky integrator with a tuple
    state) run by dynamic_rnn with sequence_length and an initial state."""

    class LeakyCell(tf.nn.rnn_cell.RNNCell):
        def __init__(self, units, leak):
            super().__init__()
            self._units = units
            self._leak = leak

        @property
        def state_size(self):
            return (self._units, self._units)

        @property
        def output_size(self):
            return self._units

        def __call__(self, inputs, state, scope=None):
            with tf.variable_scope(scope or "leaky_cell"):
                w = tf.get_variable(
                    "w", [inputs.shape[1], self._units], initializer=tf.constant_initializer(0.3)
                )
                h, total = state
                new_h = (1.0 - self._leak) * h + self._leak * tf.tanh(tf.matmul(inputs, w))
                return new_h, (new_h, total + new_h)

    rng = np.random.RandomState(23)
    inputs = tf.constant(rng.rand(2, 3, 2).astype(np.float32))
    cell = LeakyCell(2, 0.5)
    init = (tf.ones([2, 2]) * 0.1, tf.zeros([2, 2]))
    outputs, (h, total) = tf.nn.dynamic_rnn(
        cell, inputs, sequence_length=[3, 2], initial_state=init
    )
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = sess.run([outputs, h, total])
    return {
        "outputs": values[0],
        "h": values[1],
        "total": values[2],
        "vars": [v.op.name for v in tf.global_variables()],
        "out_shape": str(outputs.shape),
    }


def s29_resume_from_meta_graph(tf):
    """Save a model with its train op, loss and placeholders in collections; in a fresh
    graph import_meta_graph, restore, fetch the ops back from the collections and
    continue training; the restored global step keeps counting."""
    d = tempfile.mkdtemp()
    xs = np.array([[1.0], [2.0], [3.0]], np.float32)
    ys = np.array([[2.0], [4.1], [5.9]], np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 1], name="x")
        y = tf.placeholder(tf.float32, [None, 1], name="y")
        w = tf.Variable([[0.1]], name="w")
        gs = tf.train.get_or_create_global_step()
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y), name="loss")
        train = tf.train.MomentumOptimizer(0.02, 0.9).minimize(loss, global_step=gs)
        tf.add_to_collection("train_op", train)
        tf.add_to_collection("loss", loss)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            first = [sess.run([train, loss], {x: xs, y: ys})[1] for _ in range(3)]
            path = saver.save(sess, os.path.join(d, "m"), global_step=gs)
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta")
        train = tf.get_collection("train_op")[0]
        loss = tf.get_collection("loss")[0]
        with tf.Session() as sess:
            saver.restore(sess, path)
            feed = {"x:0": xs, "y:0": ys}
            second = [sess.run([train, loss], feed)[1] for _ in range(3)]
            step = sess.run(tf.train.get_global_step())
            w_val = sess.run(g.get_tensor_by_name("w:0"))
    return {
        "first": first,
        "second": second,
        "step": step,
        "w": w_val,
        "train_type": train.type,
        "ckpt": os.path.basename(path),
    }


def s29_in_top_k_and_gradient_override(tf):
    """cifar10_eval's precision: in_top_k over logits, a count of true predictions over
    batches; nn.top_k values and indices (ties); a RegisterGradient'ed clip used through
    gradient_override_map on Identity."""

    @tf.RegisterGradient("S29ClipGrad")
    def _clip_grad(op, grad):
        return [tf.clip_by_value(grad, -0.5, 0.5)]

    logits = tf.placeholder(tf.float32, [None, 4])
    labels = tf.placeholder(tf.int32, [None])
    top1 = tf.nn.in_top_k(logits, labels, 1)
    top2 = tf.nn.in_top_k(logits, labels, 2)
    values, indices = tf.nn.top_k(logits, k=3)
    v = tf.Variable([1.0, -2.0, 3.0])
    with tf.get_default_graph().gradient_override_map({"Identity": "S29ClipGrad"}):
        clipped = tf.identity(v)
    (grad,) = tf.gradients(tf.reduce_sum(clipped * tf.constant([2.0, -0.1, 0.3])), [v])
    rng = np.random.RandomState(24)
    true_count = [0, 0]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            lg = np.round(rng.rand(4, 4) * 4.0).astype(np.float32)
            lb = rng.randint(0, 4, 4)
            p1, p2 = sess.run([top1, top2], {logits: lg, labels: lb})
            true_count[0] += int(np.sum(p1))
            true_count[1] += int(np.sum(p2))
        tk = sess.run([values, indices], {logits: [[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]]})
        g = sess.run(grad)
    return {"true_count": true_count, "top_k": tk, "grad": g}


def s29_supervisor_managed_session(tf):
    """The old tf.train.Supervisor: managed_session initializes, runs a few steps,
    saves a checkpoint on exit at the global step; a second Supervisor over the same
    logdir restores it."""
    d = tempfile.mkdtemp()
    values = []
    for _ in range(2):
        with tf.Graph().as_default():
            gs = tf.train.get_or_create_global_step()
            w = tf.Variable(4.0, name="w")
            train = tf.train.GradientDescentOptimizer(0.25).minimize(tf.square(w), global_step=gs)
            sv = tf.train.Supervisor(logdir=d, save_model_secs=0, save_summaries_secs=0)
            with sv.managed_session() as sess:
                for _ in range(2):
                    sess.run(train)
                values.append(sess.run([gs, w]))
                sv.saver.save(sess, sv.save_path, global_step=gs)
            sv.stop()
    return {"values": values, "latest": os.path.basename(tf.train.latest_checkpoint(d))}


PROGRAMS = [
    s29_batch_norm_by_hand,
    s29_gan_two_optimizers,
    s29_bag_of_words_classifier,
    s29_custom_rnn_cell,
    s29_resume_from_meta_graph,
    s29_in_top_k_and_gradient_override,
    s29_supervisor_managed_session,
]
