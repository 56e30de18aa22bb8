"""Tensor.__getitem__ (StridedSlice) on many index expressions, values and static shapes."""

from tf1_programs._common import run


def _index_cases(tf, x):
    i = tf.constant(1)
    return {
        "int": x[1],
        "neg_int": x[-1],
        "range": x[1:3],
        "col": x[:, 1],
        "ellipsis": x[..., 2],
        "step2": x[::2],
        "reverse": x[::-1],
        "mixed": x[:, ::-2, 1:],
        "newaxis_first": x[tf.newaxis, 1],
        "newaxis_mid": x[1, tf.newaxis, :, 2],
        "newaxis_last": x[..., tf.newaxis],
        "neg_ranges": x[-2:, -3:-1],
        "past_end": x[5:],
        "empty": x[1:1],
        "clamped": x[:, -10:10],
        "int_int_int": x[1, 2, 3],
        "ellipsis_mid": x[1, ..., 0],
        "tensor_index": x[i],
        "tensor_range": x[i : i + 2, 0],
        "neg_step_bounds": x[2:0:-1, 3:0:-2],
        "all": x[:],
    }


def slicing_getitem_values(tf):
    x = tf.reshape(tf.range(60), [3, 4, 5])
    cases = _index_cases(tf, x)
    return run(tf, cases)


def slicing_getitem_static_shapes(tf):
    known = tf.reshape(tf.range(60), [3, 4, 5])
    unknown = tf.placeholder(tf.int32, [None, 4, None])
    out = {}
    for prefix, x in (("known", known), ("unknown", unknown)):
        for k, t in _index_cases(tf, x).items():
            if k != "tensor_range":  # see slicing_static_shape_folded_bounds
                out[f"{prefix}_{k}"] = str(t.shape)
    out["names"] = [t.op.name for t in _index_cases(tf, known).values()][:3]
    out["type"] = known[1].op.type
    return out


def slicing_static_shape_folded_bounds(tf):
    """Bounds computed from constants (i, i + 2) are folded into the static shape."""
    x = tf.reshape(tf.range(60), [3, 4, 5])
    i = tf.constant(1)
    return {
        "tensor_range": str(x[i : i + 2, 0].shape),
        "tensor_stop_only": str(x[: i + 1].shape),
    }


def slicing_strided_slice_masks(tf):
    x = tf.reshape(tf.range(24), [2, 3, 4])
    fetches = {
        "plain": tf.strided_slice(x, [0, 1, 0], [2, 3, 4], [1, 1, 2]),
        "begin_mask": tf.strided_slice(x, [1, 1, 1], [2, 3, 4], begin_mask=0b101),
        "end_mask": tf.strided_slice(x, [0, 0, 1], [1, 1, 2], end_mask=0b110),
        "shrink": tf.strided_slice(x, [1, 0, 0], [2, 3, 4], shrink_axis_mask=0b001),
        "ellipsis": tf.strided_slice(x, [0, 1], [1, 2], ellipsis_mask=0b01),
        "new_axis": tf.strided_slice(x, [0, 0], [1, 2], new_axis_mask=0b01),
        "slice_op": tf.slice(x, [0, 1, 1], [-1, 2, 2]),
    }
    return run(tf, fetches)


PROGRAMS = [
    slicing_getitem_values,
    slicing_getitem_static_shapes,
    slicing_static_shape_folded_bounds,
    slicing_strided_slice_masks,
]
