"""`tf.keras.preprocessing.sequence`: padding of integer sequences, skip-gram pairs and
their sampling table, and `TimeseriesGenerator` (numpy, outside the graph).

`skipgrams` draws from Python's `random` module in the same order as Keras, so a seed
gives Keras' pairs.
"""

from __future__ import annotations

import json
import random

import numpy as np

from asyncflow.keras.utils import Sequence
from asyncflow.keras.utils_more import pad_sequences

__all__ = ["pad_sequences", "skipgrams", "make_sampling_table", "TimeseriesGenerator"]


def make_sampling_table(size, sampling_factor=1e-5):
    """Keep-probabilities of word ranks 0..size-1 under a Zipf word distribution (used
    by `skipgrams` to drop frequent words)."""
    gamma = 0.577
    rank = np.arange(size)
    rank[0] = 1
    inv_fq = rank * (np.log(rank) + gamma) + 0.5 - 1.0 / (12.0 * rank)
    f = sampling_factor * inv_fq
    return np.minimum(1.0, f / np.sqrt(f))


def skipgrams(
    sequence,
    vocabulary_size,
    window_size=4,
    negative_samples=1.0,
    shuffle=True,
    categorical=False,
    sampling_table=None,
    seed=None,
):
    """(couples, labels): each word with its neighbours within `window_size` (label 1)
    and, per `negative_samples`, with random words (label 0); index 0 is skipped."""
    couples, labels = [], []
    positive, negative = ([0, 1], [1, 0]) if categorical else (1, 0)
    for i, wi in enumerate(sequence):
        if not wi:
            continue
        if sampling_table is not None and sampling_table[wi] < random.random():
            continue
        for j in range(max(0, i - window_size), min(len(sequence), i + window_size + 1)):
            if j != i and sequence[j]:
                couples.append([wi, sequence[j]])
                labels.append(positive)
    if negative_samples > 0:
        count = int(len(labels) * negative_samples)
        words = [c[0] for c in couples]
        random.shuffle(words)
        couples += [
            [words[i % len(words)], random.randint(1, int(vocabulary_size - 1))]
            for i in range(count)
        ]
        labels += [negative] * count
    if shuffle:
        if seed is None:
            seed = random.randint(0, int(10e6))
        # The same seed for both shuffles keeps couples and labels paired.
        random.seed(seed)
        random.shuffle(couples)
        random.seed(seed)
        random.shuffle(labels)
    return couples, labels


class TimeseriesGenerator(Sequence):
    """Batches of (windows of `length` steps every `sampling_rate`, the target after
    each window) from a time series, windows `stride` apart."""

    def __init__(
        self,
        data,
        targets,
        length,
        sampling_rate=1,
        stride=1,
        start_index=0,
        end_index=None,
        shuffle=False,
        reverse=False,
        batch_size=128,
    ):
        if len(data) != len(targets):
            raise ValueError(
                f"Data and targets have to be of same length. Data length is {len(data)} "
                f"while target length is {len(targets)}"
            )
        self.data, self.targets, self.length = data, targets, length
        self.sampling_rate, self.stride = sampling_rate, stride
        self.start_index = start_index + length
        self.end_index = len(data) - 1 if end_index is None else end_index
        self.shuffle, self.reverse, self.batch_size = shuffle, reverse, batch_size
        if self.start_index > self.end_index:
            raise ValueError(
                f"`start_index+length={self.start_index} > end_index={self.end_index}` is "
                "disallowed, as no part of the sequence would be left to be used as "
                "current step."
            )

    def __len__(self):
        span = self.batch_size * self.stride
        return (self.end_index - self.start_index + span) // span

    def __getitem__(self, index):
        if self.shuffle:
            rows = np.random.randint(self.start_index, self.end_index + 1, size=self.batch_size)
        else:
            first = self.start_index + self.batch_size * self.stride * index
            last = min(first + self.batch_size * self.stride, self.end_index + 1)
            rows = np.arange(first, last, self.stride)
        samples = np.array([self.data[r - self.length : r : self.sampling_rate] for r in rows])
        targets = np.array([self.targets[r] for r in rows])
        if self.reverse:
            return samples[:, ::-1, ...], targets
        return samples, targets

    def get_config(self) -> dict:
        def as_json(values, what):
            if isinstance(values, np.ndarray):
                values = values.tolist()
            try:
                return json.dumps(values)
            except TypeError as e:
                raise TypeError(f"{what} not JSON Serializable:", values) from e

        return {
            "data": as_json(self.data, "Data"),
            "targets": as_json(self.targets, "Targets"),
            "length": self.length,
            "sampling_rate": self.sampling_rate,
            "stride": self.stride,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "shuffle": self.shuffle,
            "reverse": self.reverse,
            "batch_size": self.batch_size,
        }

    def to_json(self, **kwargs) -> str:
        return json.dumps(
            {"class_name": type(self).__name__, "config": self.get_config()}, **kwargs
        )
