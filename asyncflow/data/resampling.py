"""Random selection among datasets as TF 2.21 builds it: `sample_from_datasets` (weights
as a list, a tensor or a dataset of weights) and `rejection_resample`.

TF builds both from other transformations, so they are built the same way here: the
selector is `Dataset.random(seed).batch(2)` giving each element a stateless seed, and
`stateless_multinomial` over log(weights) picks the dataset (DirectedInterleave).  The
random dataset and the multinomial draw TF's numbers (ops/philox_random.py,
ops/stateless_random_ops.py), so a seeded selection is TF's, element for element.
rejection_resample filters with a seeded `random_uniform` in the filter function and
mixes the original dataset back in with the probability TF computes.

The Dataset class is passed in (`cls`): asyncflow/data/dataset.py imports this module.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    control_flow_ops,
    logging_ops,
    manip_ops,
    math_ops,
    random_ops,
    reduction_ops,
    slicing_ops,
)
from asyncflow.ops import stateless_random_ops as srng

__all__ = ["sample_from_datasets", "rejection_resample"]


# TF's selector map of sample_from_datasets (an internal map, not DatasetV1.map): it
# keeps the cardinality and runs its function on the calling thread.
_SELECTOR = {"preserve_cardinality": True, "use_inter_op_parallelism": False}


def sample_from_datasets(
    cls, datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration=None
):
    """`tf.data.Dataset.sample_from_datasets` (see the module note).

    Raises:
      ValueError: no datasets; weights of another length.
      TypeError: weights not float32 / float64.
    """
    datasets = list(datasets)
    if not datasets:
        raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
    if isinstance(weights, cls):
        logits_ds = weights.map(lambda *p: math_ops.log(p, name="logits"))

        def select_varying(logits, seed):
            return _pick(logits, seed)

        seeds = cls.random(seed, rerandomize_each_iteration).batch(2)
        selector = cls.zip((logits_ds, seeds))._mapped(select_varying, None, attrs=_SELECTOR)
        return cls.choose_from_datasets(datasets, selector, stop_on_empty_dataset)
    if weights is None:
        logits = [[1.0] * len(datasets)]
    else:
        if isinstance(weights, ops.Tensor):
            if not weights.shape.is_compatible_with([len(datasets)]):
                raise ValueError(
                    "Invalid `weights`. The shape of `weights` should be compatible with "
                    f"`[len(datasets)]` but is {weights.shape}."
                )
        else:
            weights = list(weights)
            if len(datasets) != len(weights):
                raise ValueError(
                    "Invalid `weights`. `weights` should have the same length as `datasets` "
                    f"but got `len(weights)={len(weights)}` vs. "
                    f"`len(datasets)={len(datasets)}`."
                )
            kept = [(d, w) for d, w in zip(datasets, weights, strict=True) if w > 0]
            datasets, weights = (
                ([d for d, _ in kept], [w for _, w in kept]) if kept
                else ([datasets[0].take(0)], [1.0])
            )  # fmt: skip
        weights = ops.convert_to_tensor(weights, name="weights")
        if weights.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(
                "Invalid `weights`. `weights` type must be either `tf.float32` or "
                f"`tf.float64` but is {weights.dtype}."
            )
        logits = array_ops.expand_dims(math_ops.log(weights, name="logits"), 0)
    if len(datasets) == 1:
        return datasets[0]

    def select_constant(seed):
        return _pick(logits, seed)

    selector = cls.random(seed, rerandomize_each_iteration).batch(2)
    selector = selector._mapped(select_constant, None, attrs=_SELECTOR)
    return cls.choose_from_datasets(datasets, selector, stop_on_empty_dataset)


def _pick(logits, seed):
    draw = srng.stateless_multinomial(logits, 1, seed)
    return array_ops.squeeze(draw, axis=[0, 1])


def rejection_resample(cls, dataset, class_func, target_dist, initial_dist=None, seed=None):
    """`Dataset.rejection_resample`: (class, element) pairs whose classes follow
    `target_dist`, by rejecting elements of over-represented classes and mixing the
    original elements back in (TF's construction; see the module note).  Without
    `initial_dist` the class distribution is estimated as the data streams by.
    """
    target = math_ops.cast(ops.convert_to_tensor(target_dist, name="target_dist"), dtypes.float32)
    if initial_dist is not None:
        initial = math_ops.cast(
            ops.convert_to_tensor(initial_dist, name="initial_dist"), dtypes.float32
        )
        accept, prob_original = _acceptance_with_mixing(initial, target)
        initial_ds = cls.from_tensors(initial).repeat()
        accept_ds = cls.from_tensors(accept).repeat()
        prob_original_ds = cls.from_tensors(prob_original).repeat()
    else:
        initial_ds = _estimate_initial_dist_ds(cls, target, dataset.map(class_func))
        both = initial_ds.map(lambda initial: _acceptance_with_mixing(initial, target))
        accept_ds = both.map(lambda accept, _: accept)
        prob_original_ds = both.map(lambda _, prob: prob)
    filtered = _filter_ds(cls, dataset, accept_ds, initial_ds, class_func, seed).prefetch(3)
    static = _prob_original_static(initial_dist, target_dist) if initial_dist is not None else None

    def add_class_value(*x):
        return (class_func(*x), x[0]) if len(x) == 1 else (class_func(*x), x)

    if static == 1:
        return dataset.map(add_class_value)
    if static == 0:
        return filtered
    return sample_from_datasets(
        cls,
        [dataset.map(add_class_value), filtered],
        # (TF's map turns its list [(p, 1 - p)] into this tuple: log gives [1, 2] logits)
        prob_original_ds.map(lambda prob: ((prob, 1.0 - prob),)),
        seed,
        True,
    )


def _prob_original_static(initial_dist, target_dist):
    """TF's min(target / initial) when both are known when the graph is built, else None."""
    values = []
    for v in (initial_dist, target_dist):
        v = ops.constant_value(v) if isinstance(v, ops.Tensor) else np.asarray(v)
        if v is None:
            return None
        values.append(np.asarray(v, np.float32))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.min(values[1] / values[0])


def _acceptance_with_mixing(initial, target):
    """Per-class acceptance a_i = (r_i - min r) / (max r - min r) for r = target /
    initial, and the probability min r of taking an original element (TF's)."""
    tiny = np.finfo(initial.dtype.as_numpy_dtype).tiny
    ratio = target / (initial + ops.convert_to_tensor(tiny, dtype=initial.dtype))
    top = reduction_ops.reduce_max(ratio)
    low = reduction_ops.reduce_min(ratio)
    return (ratio - low) / (top - low), low


def _filter_ds(cls, dataset, accept_ds, initial_ds, class_func, seed):
    def maybe_warn(accept, initial):
        rejected = reduction_ops.reduce_sum((1 - accept) * initial)
        return control_flow_ops.cond(
            math_ops.less(rejected, 0.5),
            lambda: accept,
            lambda: logging_ops.Print(
                accept, [rejected, initial, accept],
                message="Proportion of examples rejected by sampler is high: ",
                summarize=100, first_n=10,
            ),
        )  # fmt: skip

    accept_ds = cls.zip((accept_ds, initial_ds)).map(maybe_warn)

    def gather_and_copy(accept, data):
        value = class_func(*data) if isinstance(data, tuple) else class_func(data)
        return value, slicing_ops.gather(accept, value), data

    def reject(unused_class, p, unused_data):
        return random_ops.random_uniform([], seed=seed, dtype=p.dtype) < p

    kept = cls.zip((accept_ds, dataset)).map(gather_and_copy).filter(reject)
    return kept.map(lambda value, _, data: (value, data))


def _estimate_initial_dist_ds(cls, target, class_values_ds, batch=32, smoothing=10):
    n = target.shape[0] if target.shape[0] is not None else array_ops.shape(target)[0]
    seen0 = array_ops.fill([n], np.int64(smoothing))

    def update(seen, c):
        seen = math_ops.add(
            seen, reduction_ops.reduce_sum(array_ops.one_hot(c, n, dtype=dtypes.int64), 0)
        )
        dist = math_ops.truediv(seen, reduction_ops.reduce_sum(seen))
        dist = math_ops.cast(dist, dtypes.float32)
        return seen, manip_ops.tile(array_ops.expand_dims(dist, 0), [batch, 1])

    return class_values_ds.batch(batch).scan(seen0, update).unbatch()
