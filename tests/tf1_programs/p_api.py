"""Tutorial-style programs over the API of issue 20: tf.data feeding training, streaming
metrics, sampled losses, tf.image (deterministic: constant initialisers, no shuffling).
(TF 2.21's tf.compat.v1.layers needs Keras 2, so layer classes are checked against
NumPy in tests/test_layer_classes.py instead.)"""

import numpy as np


def _drain(sess, t, feed=None):
    out = []
    while True:
        try:
            out.append(sess.run(t, feed))
        except Exception as exc:  # noqa: BLE001 - OutOfRangeError of either library
            if type(exc).__name__ != "OutOfRangeError":
                raise
            return out


def api_data_pipeline(tf):
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.array([0, 1, 0, 1, 1], np.int64)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2.0, b + 1))
    ds = ds.batch(2).repeat(2)
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    n = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.range(n).filter(lambda v: v % 2 > 0).make_initializable_iterator()
    padded = tf.data.Dataset.range(1, 4).map(lambda v: tf.fill([v], v)).padded_batch(2, [None])
    pnext = tf.data.make_one_shot_iterator(padded).get_next()
    with tf.Session() as sess:
        batches = _drain(sess, nxt)
        sess.run(it.initializer, {n: 7})
        odd = _drain(sess, it.get_next())
        pads = _drain(sess, pnext)
    return {"batches": batches, "odd": odd, "padded": pads, "shapes": str(ds.output_shapes)}


def api_data_training(tf):
    rng = np.random.RandomState(0)
    x = rng.rand(32, 3).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat(3)
    feats, labels = tf.data.make_one_shot_iterator(ds).get_next()
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(feats, w) + b - labels))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        while True:
            try:
                losses.append(sess.run([train, loss])[1])
            except tf.errors.OutOfRangeError:
                break
        return {"losses": losses, "w": sess.run(w), "b": sess.run(b)}


def api_metrics(tf):
    labels = tf.placeholder(tf.int64, [None])
    scores = tf.placeholder(tf.float32, [None])
    preds = tf.cast(scores > 0.5, tf.int64)
    acc, acc_up = tf.metrics.accuracy(labels, preds)
    auc, auc_up = tf.metrics.auc(labels, scores, num_thresholds=20)
    prec, prec_up = tf.metrics.precision(labels, preds)
    batches = [([1, 0, 1, 1], [0.9, 0.2, 0.4, 0.7]), ([0, 0, 1], [0.6, 0.1, 0.8])]
    ups = []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for lab, sc in batches:
            ups.append(sess.run([acc_up, auc_up, prec_up], {labels: lab, scores: sc}))
        final = sess.run([acc, auc, prec])
    return {"updates": ups, "final": final}


def api_sampled_losses(tf):
    rng = np.random.RandomState(1)
    w = tf.constant(rng.randn(8, 3).astype(np.float32))
    b = tf.constant(rng.randn(8).astype(np.float32))
    x = tf.constant(rng.randn(2, 3).astype(np.float32))
    labels = tf.constant([[2], [5]], tf.int64)
    sv = (
        tf.constant([1, 5, 7], tf.int64),
        tf.constant([[0.2], [0.1]]),
        tf.constant([0.3, 0.1, 0.05]),
    )
    nce = tf.nn.nce_loss(w, b, labels, x, 3, 8, sampled_values=sv)
    ssm = tf.nn.sampled_softmax_loss(w, b, labels, x, 3, 8, sampled_values=sv)
    with tf.Session() as sess:
        return sess.run({"nce": nce, "ssm": ssm})


def api_image(tf):
    img = tf.constant(np.arange(48, dtype=np.float32).reshape(4, 4, 3) / 48.0)
    out = {
        "resized": tf.image.resize_images(img, [3, 5]),
        "nn": tf.image.resize_images(img, [2, 2], tf.image.ResizeMethod.NEAREST_NEIGHBOR),
        "crop": tf.image.central_crop(img, 0.5),
        "std": tf.image.per_image_standardization(img),
        "flip": tf.image.flip_left_right(img),
        "gray": tf.image.rgb_to_grayscale(img),
        "u8": tf.image.convert_image_dtype(img, tf.uint8),
        "pad": tf.image.resize_image_with_crop_or_pad(img, 5, 3),
    }
    with tf.Session() as sess:
        return sess.run(out)


PROGRAMS = [api_data_pipeline, api_data_training, api_metrics, api_sampled_losses, api_image]
