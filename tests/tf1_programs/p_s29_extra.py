"""Further TF1 program fragments (session 29) from model-garden input and evaluation
code: sampled softmax with accidental hits removed, seeded image distortions
(sample_distorted_bounding_box, random brightness/contrast), bucket_by_sequence_length,
time-major dynamic_rnn with static_bidirectional_rnn, a sharded Saver, AUC variants and
precision/recall at k with out-of-range labels."""

import os
import tempfile

import numpy as np


def s29_sampled_softmax(tf):
    """sampled_softmax_loss (seeded sampler, remove_accidental_hits) in training and the
    full softmax for evaluation, as the PTB/NMT large-vocabulary recipe."""
    rng = np.random.RandomState(41)
    vocab, dim = 10, 3
    w = tf.Variable(rng.rand(vocab, dim).astype(np.float32) - 0.5)
    b = tf.Variable(np.zeros(vocab, np.float32))
    h = tf.constant(rng.rand(4, dim).astype(np.float32))
    labels = tf.constant([[1], [3], [3], [9]], tf.int64)
    sampled = tf.nn.learned_unigram_candidate_sampler(labels, 1, 4, True, vocab, seed=5)
    loss = tf.reduce_mean(
        tf.nn.sampled_softmax_loss(
            w, b, labels, h, num_sampled=4, num_classes=vocab, sampled_values=sampled
        )
    )
    full = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(labels, [-1]), logits=tf.matmul(h, w, transpose_b=True) + b
        )
    )
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        cands = sess.run(sampled)
        losses = [sess.run([train, loss, full])[1:] for _ in range(3)]
    return {"candidates": list(cands), "losses": losses}


def s29_image_distortions(tf):
    """cifar10/inception distortions with op seeds: sample_distorted_bounding_box +
    slice, random_brightness, random_contrast, random_saturation, random_hue."""
    tf.set_random_seed(12)
    rng = np.random.RandomState(42)
    image = tf.constant(rng.rand(8, 8, 3).astype(np.float32))
    boxes = tf.constant([[[0.1, 0.1, 0.9, 0.9]]])
    begin, size, bbox = tf.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=boxes,
        min_object_covered=0.3,
        area_range=[0.2, 1.0],
        seed=7,
    )
    crop = tf.slice(image, begin, size)
    bright = tf.image.random_brightness(image, 0.3, seed=1)
    contrast = tf.image.random_contrast(image, 0.5, 1.5, seed=2)
    sat = tf.image.random_saturation(image, 0.5, 1.5, seed=3)
    hue = tf.image.random_hue(image, 0.2, seed=4)
    with tf.Session() as sess:
        got = sess.run([begin, size, bbox, tf.reduce_sum(crop)])
        pix = sess.run([bright[0, 0], contrast[1, 1], sat[2, 2], hue[3, 3]])
    return {"box": got, "pixels": pix}


def s29_bucket_by_length(tf):
    """NMT-style batching: bucket_by_sequence_length with padded batches and boundaries,
    from a generator of variable-length sequences."""

    def gen():
        for n in [1, 5, 2, 6, 3, 2, 7, 1]:
            yield np.arange(n, dtype=np.int64)

    ds = tf.data.Dataset.from_generator(gen, tf.int64, tf.TensorShape([None]))
    ds = ds.apply(
        tf.data.experimental.bucket_by_sequence_length(
            lambda x: tf.shape(x)[0], [3, 6], [2, 2, 2], pad_to_bucket_boundary=False
        )
    )
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    out = []
    with tf.Session() as sess:
        try:
            while True:
                out.append(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            pass
    return {"batches": out}


def s29_time_major_and_static_bidi(tf):
    """A time-major dynamic_rnn (BasicRNNCell) and static_bidirectional_rnn over the
    same inputs unstacked, with their variable and output names."""
    rng = np.random.RandomState(43)
    x = tf.constant(rng.rand(3, 2, 2).astype(np.float32))  # [time, batch, depth]
    init = tf.constant_initializer(0.2)
    with tf.variable_scope("tm"):
        cell = tf.nn.rnn_cell.BasicRNNCell(3)
        out_tm, st_tm = tf.nn.dynamic_rnn(
            cell, x, time_major=True, dtype=tf.float32, sequence_length=[3, 2]
        )
    with tf.variable_scope("bi", initializer=init):
        fw = tf.nn.rnn_cell.GRUCell(2)
        bw = tf.nn.rnn_cell.GRUCell(2)
        outs, st_fw, st_bw = tf.nn.static_bidirectional_rnn(
            fw, bw, tf.unstack(x), dtype=tf.float32, sequence_length=[3, 2]
        )
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tm_shape = sess.run(tf.shape(out_tm))
        values = sess.run([outs[-1], st_fw, st_bw])
    return {
        "tm_shape": tm_shape,
        "values": values,
        # (not the static states' names: asyncflow selects where TF builds a tf.cond
        # per step, so they are .../Select_5, TF's .../cond_2/Merge_1)
        "names": [t.name for t in (out_tm, st_tm, outs[0])],
        "vars": [v.op.name for v in tf.global_variables()],
        "st_tm_shape": str(st_tm.shape),
    }


def s29_sharded_saver(tf):
    """Variables on two devices saved by Saver(sharded=True): the files written, the
    checkpoint's variables, and a restore into a fresh graph."""
    d = tempfile.mkdtemp()
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            a = tf.Variable([1.0, 2.0], name="a")
        with tf.device("/device:CPU:0"):
            b = tf.Variable(3, name="b")
        saver = tf.train.Saver(sharded=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, os.path.join(d, "sharded"))
    files = sorted(f for f in os.listdir(d) if f.startswith("sharded"))
    with tf.Graph().as_default():
        a2 = tf.Variable([0.0, 0.0], name="a")
        b2 = tf.Variable(0, name="b")
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, path)
            restored = sess.run([a2, b2])
    return {
        "path": os.path.basename(path),
        "files": files,
        "restored": restored,
        "listed": [n for n, _ in tf.train.list_variables(path)],
        "b_name": b.op.name,
        "a_device": a.device,
    }


def s29_auc_variants_and_at_k(tf):
    """tf.metrics.auc with the PR curve and careful interpolation, and precision_at_k /
    recall_at_k with a class_id and with dense labels past the class count."""
    rng = np.random.RandomState(44)
    labels = tf.constant(rng.randint(0, 2, 12).astype(bool))
    scores = tf.constant(rng.rand(12).astype(np.float32))
    roc, roc_up = tf.metrics.auc(labels, scores, num_thresholds=10)
    pr, pr_up = tf.metrics.auc(
        labels, scores, num_thresholds=10, curve="PR", summation_method="careful_interpolation"
    )
    mn, mn_up = tf.metrics.auc(labels, scores, num_thresholds=10, summation_method="minoring")
    preds = tf.constant([[0.1, 0.5, 0.2, 0.3], [0.9, 0.1, 0.4, 0.2]])
    dense = tf.constant([[1, 7], [2, 0]], tf.int64)
    p_k, p_up = tf.metrics.precision_at_k(dense, preds, k=2)
    r_k, r_up = tf.metrics.recall_at_k(dense, preds, k=2)
    p_c, p_c_up = tf.metrics.precision_at_k(dense, preds, k=2, class_id=2)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        ups = sess.run([roc_up, pr_up, mn_up, p_up, r_up, p_c_up])
        vals = sess.run([roc, pr, mn, p_k, r_k, p_c])
    return {"ups": ups, "vals": vals, "names": [t.name for t in (pr, p_k, r_k, p_c)]}


def s29_finetune_partitioned(tf):
    """Fine-tuning: a partitioned embedding (fixed_size_partitioner, mod and div lookups)
    trained and saved, then init_from_checkpoint with a scope assignment map into a
    new model whose other variables keep their initializers."""
    d = tempfile.mkdtemp()
    ids = [0, 3, 4, 6]
    table = np.arange(7 * 2, dtype=np.float32).reshape(7, 2) / 10.0
    with tf.Graph().as_default():
        with tf.variable_scope("pre"):
            emb = tf.get_variable(
                "emb",
                initializer=tf.constant(table),
                partitioner=tf.fixed_size_partitioner(3),
            )
        mod = tf.nn.embedding_lookup(emb, ids, partition_strategy="mod")
        div = tf.nn.embedding_lookup(emb, ids, partition_strategy="div")
        loss = tf.reduce_sum(tf.square(mod))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            before = sess.run([mod, div])
            sess.run(train)
            path = saver.save(sess, os.path.join(d, "pre"))
        parts = [v.op.name for v in tf.global_variables()]
    with tf.Graph().as_default():
        with tf.variable_scope("fine"):
            emb2 = tf.get_variable(
                "emb",
                [7, 2],
                partitioner=tf.fixed_size_partitioner(3),
                initializer=tf.zeros_initializer(),
            )
        head = tf.get_variable("head", initializer=tf.constant([1.0, -1.0]))
        tf.train.init_from_checkpoint(path, {"pre/": "fine/"})
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            after = sess.run([tf.convert_to_tensor(emb2), head])
    return {
        "before": before,
        "after": after,
        "parts": parts,
        "listed": [[n, s] for n, s in tf.train.list_variables(path)],
    }


def s29_metric_result_names(tf):
    """The tensors an eval script fetches or exports by name: value, update and local
    variable names (and values) of the threshold, IoU, cosine and top-k metrics."""
    labels = tf.constant([True, False, True, True])
    scores = tf.constant([0.2, 0.7, 0.4, 0.9])
    ids = tf.constant([[0], [1], [2], [1]], tf.int64)
    top = tf.constant([[0], [2], [2], [1]], tf.int64)
    unit = tf.nn.l2_normalize(tf.reshape(scores, [2, 2]), axis=1)
    metrics = [
        tf.metrics.precision_at_thresholds(labels, scores, [0.3, 0.6]),
        tf.metrics.recall_at_thresholds(labels, scores, [0.3, 0.6]),
        tf.metrics.mean_iou(tf.reshape(ids, [-1]), tf.reshape(top, [-1]), 3),
        tf.metrics.mean_cosine_distance(unit, tf.reverse(unit, [1]), 1),
        tf.metrics.precision_at_top_k(ids, top, k=1),
        tf.metrics.recall_at_top_k(ids, top, k=1),
    ]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        ups = sess.run([u for _, u in metrics])
        vals = sess.run([v for v, _ in metrics])
    return {
        "ups": ups,
        "vals": vals,
        "names": [[v.name, u.name] for v, u in metrics],
        "locals": [v.op.name for v in tf.local_variables()],
    }


PROGRAMS = [
    s29_sampled_softmax,
    s29_image_distortions,
    s29_bucket_by_length,
    s29_time_major_and_static_bidi,
    s29_sharded_saver,
    s29_auc_variants_and_at_k,
    s29_finetune_partitioned,
    s29_metric_result_names,
]
