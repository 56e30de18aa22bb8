"""Input-pipeline shaped TF1 programs (session 29): the cifar10 binary reader with
queue runners and shuffle_batch (seeded, one thread), TFRecord writing and
parse_single_example through slice/string producers, tf.py_func inside a tf.data map,
tf.image preprocessing in a pipeline, and the feedable/reinitializable iterators."""

import os
import tempfile
import time

import numpy as np


def _cifar_files(d, rng, n_files=2, per_file=4):
    files = []
    for i in range(n_files):
        path = os.path.join(d, f"data_batch_{i + 1}.bin")
        with open(path, "wb") as f:
            for _ in range(per_file):
                f.write(bytes([rng.randint(0, 10)]))
                f.write(rng.randint(0, 256, 3 * 4 * 4).astype(np.uint8).tobytes())
        files.append(path)
    return files


def s29_cifar10_input_pipeline(tf):
    """cifar10_input: string_input_producer (seeded shuffle), FixedLengthRecordReader,
    decode_raw, label/depth-major image slices, transpose, random_crop + flip (seeded),
    per_image_standardization, shuffle_batch (one thread, seed), Coordinator.

    Each batch is dequeued from a full queue: a RandomShuffleQueue's dequeue_many takes
    elements one by one as they come above min_after_dequeue (TF's kernel and ours), so
    which three a batch gets otherwise depends on the runner thread's pace against the
    caller's (under load, 1 run in 3-5 gave another batch, in both)."""
    tf.set_random_seed(1)
    rng = np.random.RandomState(10)
    files = _cifar_files(tempfile.mkdtemp(), rng)
    label_bytes, height, width, depth = 1, 4, 4, 3
    record_bytes = label_bytes + height * width * depth
    filename_queue = tf.train.string_input_producer(files, seed=3)
    reader = tf.FixedLengthRecordReader(record_bytes=record_bytes)
    key, value = reader.read(filename_queue)
    record = tf.decode_raw(value, tf.uint8)
    label = tf.cast(tf.strided_slice(record, [0], [label_bytes]), tf.int32)
    major = tf.reshape(
        tf.strided_slice(record, [label_bytes], [record_bytes]), [depth, height, width]
    )
    image = tf.cast(tf.transpose(major, [1, 2, 0]), tf.float32)
    distorted = tf.random_crop(image, [3, 3, 3], seed=4)
    distorted = tf.image.random_flip_left_right(distorted, seed=5)
    distorted = tf.image.per_image_standardization(distorted)
    distorted.set_shape([3, 3, 3])
    label.set_shape([1])
    images, labels = tf.train.shuffle_batch(
        [distorted, label],
        batch_size=3,
        num_threads=1,
        capacity=9,
        min_after_dequeue=6,
        seed=6,
    )
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        (runner,) = [
            qr for qr in tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS) if "shuffle" in qr.name
        ]
        size = runner.queue.size()

        def when_full(fetches):
            deadline = time.monotonic() + 30
            while sess.run(size) < 9 and time.monotonic() < deadline:
                time.sleep(0.002)
            return sess.run(fetches)

        batches = [when_full([images, labels]) for _ in range(3)]
        coord.request_stop()
        coord.join(threads)
    return {
        "batches": batches,
        "shapes": [str(images.shape), str(labels.shape)],
        "key_dtype": key.dtype.name,
        "queue_runners": sorted(qr.name for qr in tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)),
    }


def s29_tfrecord_parse_batch(tf):
    """Write tf.train.Examples with TFRecordWriter, read them back through
    string_input_producer + TFRecordReader + parse_single_example (fixed-len, var-len
    and defaulted features), tf.train.batch with dynamic_pad, until OutOfRange."""
    d = tempfile.mkdtemp()
    path = os.path.join(d, "train.tfrecords")
    with tf.python_io.TFRecordWriter(path) as writer:
        for i in range(5):
            ex = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
                        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5, -i])),
                        "tokens": tf.train.Feature(
                            int64_list=tf.train.Int64List(value=list(range(i % 3 + 1)))
                        ),
                    }
                )
            )
            writer.write(ex.SerializeToString())
    queue = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    _, serialized = tf.TFRecordReader().read(queue)
    feats = tf.parse_single_example(
        serialized,
        {
            "label": tf.FixedLenFeature([], tf.int64),
            "x": tf.FixedLenFeature([2], tf.float32),
            "tokens": tf.VarLenFeature(tf.int64),
            "weight": tf.FixedLenFeature([], tf.float32, default_value=1.5),
        },
    )
    tokens = tf.sparse_tensor_to_dense(feats["tokens"])
    batch = tf.train.batch(
        [feats["label"], feats["x"], tokens, feats["weight"]],
        batch_size=2,
        dynamic_pad=True,
        allow_smaller_final_batch=True,
    )
    got = []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while True:
                got.append(sess.run(batch))
        except tf.errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    records = [
        tf.train.Example.FromString(r).features.feature["label"].int64_list.value[0]
        for r in tf.python_io.tf_record_iterator(path)
    ]
    return {"batches": got, "records": records, "shapes": [str(t.shape) for t in batch]}


def s29_slice_input_producer(tf):
    """slice_input_producer over in-memory arrays (no shuffle, 2 epochs) into
    batch_join of two readers' worth of tensors, and tf.train.limit_epochs."""
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    ys = np.array([10, 11, 12], np.int32)
    x, y = tf.train.slice_input_producer([xs, ys], num_epochs=2, shuffle=False)
    batch = tf.train.batch([x, y], batch_size=4, allow_smaller_final_batch=True)
    limited = tf.train.limit_epochs(tf.constant([7, 8]), num_epochs=2)
    got, lim = [], []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while True:
                got.append(sess.run(batch))
        except tf.errors.OutOfRangeError:
            pass
        try:
            while True:
                lim.append(sess.run(limited))
        except tf.errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    return {"batches": got, "limited": lim}


def s29_py_func_dataset(tf):
    """tf.py_func inside Dataset.map (numpy tokenizer returning two outputs, shapes
    restored with set_shape), padded_batch, an initializable iterator over a placeholder
    file list, and a py_func in the graph with stateful=False."""

    def tokenize(line):
        words = line.decode().split()
        ids = np.array([len(w) for w in words], np.int64)
        return ids, np.int32(len(words))

    def parse(line):
        ids, n = tf.py_func(tokenize, [line], [tf.int64, tf.int32])
        ids.set_shape([None])
        n.set_shape([])
        return ids, n

    lines = tf.placeholder(tf.string, [None])
    ds = tf.data.Dataset.from_tensor_slices(lines).map(parse)
    ds = ds.padded_batch(2, padded_shapes=([None], []), padding_values=(np.int64(-1), 0))
    it = ds.make_initializable_iterator()
    ids, n = it.get_next()
    doubled = tf.py_func(
        lambda a: (a * 2).astype(np.float32), [tf.constant([1.0, 2.5])], tf.float32, stateful=False
    )
    got = []
    with tf.Session() as sess:
        for feed in (["a bb ccc", "dddd", "e ff"], ["xyz uv"]):
            sess.run(it.initializer, {lines: feed})
            try:
                while True:
                    got.append(sess.run([ids, n]))
            except tf.errors.OutOfRangeError:
                pass
        dbl = sess.run(doubled)
    return {
        "batches": got,
        "doubled": dbl,
        "types": [str(t) for t in tf.data.get_output_types(ds)],
        "shapes": [str(s) for s in tf.data.get_output_shapes(ds)],
    }


def s29_image_preprocessing_pipeline(tf):
    """Inception-style preprocessing in Dataset.map: convert_image_dtype, central_crop,
    resize_images (bilinear, align_corners), adjust_brightness / contrast / saturation /
    hue, rgb_to_grayscale, pad_to_bounding_box, crop_to_bounding_box, flip ops."""
    rng = np.random.RandomState(12)
    imgs = rng.randint(0, 256, (3, 6, 6, 3)).astype(np.uint8)

    def preprocess(img):
        img = tf.image.convert_image_dtype(img, tf.float32)
        img = tf.image.central_crop(img, 0.7)
        img = tf.image.resize_images(img, [5, 5], align_corners=True)
        img = tf.image.adjust_brightness(img, 0.1)
        img = tf.image.adjust_contrast(img, 1.5)
        img = tf.image.adjust_saturation(img, 0.5)
        img = tf.image.adjust_hue(img, 0.2)
        img = tf.clip_by_value(img, 0.0, 1.0)
        gray = tf.image.rgb_to_grayscale(img)
        padded = tf.image.pad_to_bounding_box(gray, 1, 0, 6, 6)
        cropped = tf.image.crop_to_bounding_box(padded, 0, 1, 4, 4)
        return tf.image.flip_up_down(tf.image.flip_left_right(img)), cropped

    ds = tf.data.Dataset.from_tensor_slices(imgs).map(preprocess).batch(2)
    a, b = tf.data.make_one_shot_iterator(ds).get_next()
    out = []
    with tf.Session() as sess:
        try:
            while True:
                out.append(sess.run([a, b]))
        except tf.errors.OutOfRangeError:
            pass
    return {"out": out, "shapes": [str(a.shape), str(b.shape)]}


def s29_feedable_iterator(tf):
    """The feedable-iterator recipe: a string handle placeholder switching between a
    repeating shuffled (seeded) training dataset and a validation dataset, plus
    Iterator.from_structure reinitialized over two datasets."""
    train = tf.data.Dataset.range(6).shuffle(6, seed=2).map(lambda v: v * 10).repeat()
    valid = tf.data.Dataset.range(3).map(lambda v: -v)
    handle = tf.placeholder(tf.string, shape=[])
    it = tf.data.Iterator.from_string_handle(
        handle, tf.data.get_output_types(train), tf.data.get_output_shapes(train)
    )
    nxt = it.get_next()
    train_it = tf.data.make_one_shot_iterator(train)
    valid_it = tf.data.make_initializable_iterator(valid)
    re_it = tf.data.Iterator.from_structure(tf.int64, tf.TensorShape([]))
    re_next = re_it.get_next()
    init_a = re_it.make_initializer(tf.data.Dataset.range(2))
    init_b = re_it.make_initializer(tf.data.Dataset.range(10, 13))
    with tf.Session() as sess:
        th, vh = sess.run([train_it.string_handle(), valid_it.string_handle()])
        t_vals = [sess.run(nxt, {handle: th}) for _ in range(8)]
        sess.run(valid_it.initializer)
        v_vals = [sess.run(nxt, {handle: vh}) for _ in range(3)]
        t_more = [sess.run(nxt, {handle: th}) for _ in range(2)]
        sess.run(init_b)
        r_vals = [sess.run(re_next) for _ in range(2)]
        sess.run(init_a)
        r_vals += [sess.run(re_next) for _ in range(2)]
    return {"train": t_vals, "valid": v_vals, "train_more": t_more, "re": r_vals}


def s29_tfrecord_dataset_epochs(tf):
    """The tf.data rewrite of an input_fn: TFRecordDataset, shuffle(seed) reshuffled
    each epoch, batch then parse_example (vectorized), map with num_parallel_calls,
    prefetch; an initializable iterator re-run for two epochs; padded sparse features."""
    d = tempfile.mkdtemp()
    path = os.path.join(d, "data.tfrecord")
    with tf.python_io.TFRecordWriter(path) as writer:
        for i in range(6):
            feats = {
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"t"] * (i % 3))),
            }
            ex = tf.train.Example(features=tf.train.Features(feature=feats))
            writer.write(ex.SerializeToString())
    spec = {"id": tf.FixedLenFeature([], tf.int64), "tags": tf.VarLenFeature(tf.string)}
    ds = tf.data.TFRecordDataset([path]).shuffle(6, seed=4, reshuffle_each_iteration=True)
    ds = ds.batch(4).map(lambda s: tf.parse_example(s, spec), num_parallel_calls=2)
    ds = ds.map(lambda f: (f["id"] * 2, tf.sparse.to_dense(f["tags"], default_value="-")))
    ds = ds.prefetch(1)
    it = tf.data.make_initializable_iterator(ds)
    ids, tags = it.get_next()
    epochs = []
    with tf.Session() as sess:
        for _ in range(2):
            sess.run(it.initializer)
            got = []
            try:
                while True:
                    got.append(sess.run([ids, tags]))
            except tf.errors.OutOfRangeError:
                pass
            epochs.append(got)
    return {"epochs": epochs, "shapes": [str(ids.shape), str(tags.shape)]}


PROGRAMS = [
    s29_cifar10_input_pipeline,
    s29_tfrecord_parse_batch,
    s29_slice_input_producer,
    s29_py_func_dataset,
    s29_image_preprocessing_pipeline,
    s29_feedable_iterator,
    s29_tfrecord_dataset_epochs,
]
