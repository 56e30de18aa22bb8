"""Train a digits classifier from a TFRecord file through a TF1 queue input pipeline.

    .venv/bin/python examples/input_pipeline.py [--epochs 20] [--batch-size 64]

1. Writes scikit-learn's bundled digits data (no download) to TFRecord files of
   serialized `tf.train.Example`s with `af.python_io.TFRecordWriter`.
2. Builds the classic pipeline: string_input_producer (num_epochs) -> TFRecordReader ->
   parse_single_example -> shuffle_batch (two enqueue tasks), the queue runners
   filling the queues in the background, a Coordinator stopping them at the end.
3. Trains a small MLP until the input raises OutOfRangeError, with a tqdm progress bar,
   then scores the held-out file read back with `tf_record_iterator`.

Needs the examples extra: scikit-learn and tqdm.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import asyncflow as af
from asyncflow import example_pb, python_io
from asyncflow.ops import parsing_ops, reader_ops
from asyncflow.train import input as tf_input
from asyncflow.train import queue_runner
from asyncflow.train.coordinator import Coordinator

FEATURES = {
    "image": parsing_ops.FixedLenFeature([64], af.float32),
    "label": parsing_ops.FixedLenFeature([], af.int64),
}


def write_records(path: str, images: np.ndarray, labels: np.ndarray) -> None:
    with python_io.TFRecordWriter(path) as writer:
        for image, label in zip(images, labels):
            example = example_pb.Example(
                features=example_pb.Features(
                    feature={
                        "image": example_pb.Feature(
                            float_list=example_pb.FloatList(value=image.tolist())
                        ),
                        "label": example_pb.Feature(
                            int64_list=example_pb.Int64List(value=[int(label)])
                        ),
                    }
                )
            )
            writer.write(example.SerializeToString())


def read_records(path: str) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    for record in python_io.tf_record_iterator(path):
        feature = example_pb.Example.FromString(record).features.feature
        images.append(feature["image"].float_list.value)
        labels.append(feature["label"].int64_list.value[0])
    return np.asarray(images, np.float32), np.asarray(labels, np.int64)


def model(images, hidden: int = 64):
    """Logits of a one-hidden-layer MLP (variables created on the first call only)."""
    with af.variable_scope("mlp", reuse=af.AUTO_REUSE):
        w1 = af.get_variable("w1", [64, hidden], initializer=af.glorot_uniform_initializer())
        b1 = af.get_variable("b1", [hidden], initializer=af.zeros_initializer())
        w2 = af.get_variable("w2", [hidden, 10], initializer=af.glorot_uniform_initializer())
        b2 = af.get_variable("b2", [10], initializer=af.zeros_initializer())
    return af.matmul(af.nn.relu(af.matmul(images, w1) + b1), w2) + b2


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--dir", default=None, help="where to write the TFRecord files")
    args = p.parse_args()

    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(labels))
    train_idx, test_idx = order[:1500], order[1500:]
    out_dir = args.dir or tempfile.mkdtemp(prefix="digits_")
    train_path = os.path.join(out_dir, "train.tfrecord")
    test_path = os.path.join(out_dir, "test.tfrecord")
    write_records(train_path, images[train_idx], labels[train_idx])
    write_records(test_path, images[test_idx], labels[test_idx])
    print(f"wrote {len(train_idx)} + {len(test_idx)} examples to {out_dir}")

    # The input pipeline: filenames -> reader -> parse -> shuffle_batch.
    filenames = tf_input.string_input_producer([train_path], num_epochs=args.epochs, seed=1)
    _, serialized = reader_ops.TFRecordReader().read(filenames)
    example = parsing_ops.parse_single_example(serialized, FEATURES)
    image_batch, label_batch = tf_input.shuffle_batch(
        [example["image"], example["label"]],
        batch_size=args.batch_size,
        capacity=1000,
        min_after_dequeue=500,
        num_threads=2,
        seed=1,
        allow_smaller_final_batch=True,
    )

    logits = model(image_batch)
    log_probs = af.nn.log_softmax(logits)
    loss = -af.reduce_mean(af.reduce_sum(af.one_hot(label_batch, 10) * log_probs, axis=1))
    train_op = af.train.AdamOptimizer(0.01).minimize(loss)

    eval_images = af.placeholder(af.float32, [None, 64])
    predictions = af.argmax(model(eval_images), axis=1)

    steps = args.epochs * len(train_idx) // args.batch_size + 1
    with af.Session() as sess:
        sess.run([af.global_variables_initializer(), af.local_variables_initializer()])
        coord = Coordinator()
        threads = queue_runner.start_queue_runners(sess=sess, coord=coord)
        bar = tqdm(total=steps, unit="step")
        try:
            while not coord.should_stop():
                _, value = sess.run([train_op, loss])
                bar.update()
                bar.set_postfix(loss=f"{value:.3f}")
        except af.errors.OutOfRangeError:
            pass  # every epoch has been read
        finally:
            bar.close()
            coord.request_stop()
        coord.join(threads)

        test_images, test_labels = read_records(test_path)
        predicted = sess.run(predictions, {eval_images: test_images})
        print(f"test accuracy: {np.mean(predicted == test_labels):.3f}")


if __name__ == "__main__":
    main()
