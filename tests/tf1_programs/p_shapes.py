"""Static shapes inferred at build time, with unknown dimensions and ranks."""

from tf1_programs._common import error_class, shape_info


def shapes_inference(tf):
    p = tf.placeholder(tf.float32, [None, 3])
    u = tf.placeholder(tf.float32)
    i = tf.placeholder(tf.int32, [None])
    s = tf.placeholder(tf.float32, [])
    tensors = {
        "placeholder": p,
        "unknown_rank": u,
        "scalar": s,
        "add_bcast": p + tf.ones([3]),
        "add_unknown_rank": p + u,
        "add_bcast_1": tf.ones([4, 1, 3]) + p,
        "matmul": tf.matmul(p, tf.ones([3, 2])),
        "reshape_neg1": tf.reshape(p, [-1]),
        "reshape_known": tf.reshape(p, [-1, 6]),
        "concat_0": tf.concat([p, p], 0),
        "concat_1": tf.concat([p, p], 1),
        "transpose": tf.transpose(p),
        "expand": tf.expand_dims(p, 1),
        "tile": tf.tile(p, [2, 2]),
        "one_hot": tf.one_hot(i, 5),
        "gather": tf.gather(p, i),
        "gather_axis1": tf.gather(p, [0, 2], axis=1),
        "stack": tf.stack([p, p], axis=1),
        "unstack_first": tf.unstack(tf.ones([2, 3]), axis=1)[0],
        "split_first": tf.split(p, 3, axis=1)[0],
        "shape_op": tf.shape(p),
        "size": tf.size(p),
        "where_1arg": tf.where(i > 0),
        "squeeze": tf.squeeze(tf.ones([1, 3, 1])),
        "pad": tf.pad(p, [[1, 1], [0, 2]]),
        "fill_unknown": tf.fill(tf.shape(p), 1.0),
        "zeros_like": tf.zeros_like(p),
        "cast": tf.cast(p, tf.int32),
        "range": tf.range(10),
        "random_normal": tf.random_normal([2, 3]),
        "random_uniform_int": tf.random_uniform([4], maxval=10, dtype=tf.int32),
        "slice_neg1": tf.slice(tf.ones([4, 5]), [1, 2], [-1, 2]),
    }
    out = {k: shape_info(t) for k, t in tensors.items()}
    out["dtypes"] = {k: t.dtype.name for k, t in tensors.items()}
    q = tf.placeholder(tf.float32, [None, None])
    q.set_shape([2, None])
    out["set_shape"] = shape_info(q)
    out["set_shape_conflict"] = error_class(lambda: q.set_shape([3, 4]))
    out["get_shape_eq"] = p.get_shape() == p.shape
    out["dim_value"] = [p.shape[1].value if hasattr(p.shape[1], "value") else p.shape[1]]
    return out


def shapes_tensor_shape_api(tf):
    a = tf.TensorShape([None, 3])
    b = tf.TensorShape([2, None])
    u = tf.TensorShape(None)
    return {
        "merge": str(a.merge_with(b)),
        "merge_unknown": str(u.merge_with(a)),
        "compat": [a.is_compatible_with(b), a.is_compatible_with([2, 4]), u.is_compatible_with(a)],
        "as_list": a.as_list(),
        "ndims": [a.ndims, u.ndims],
        "fully_defined": [a.is_fully_defined(), a.merge_with(b).is_fully_defined()],
        "concat": str(a.concatenate(b)),
        "num_elements": [tf.TensorShape([2, 3]).num_elements(), a.num_elements()],
        "str_unknown": str(u),
        "str_scalar": str(tf.TensorShape([])),
        "eq": [a == tf.TensorShape([None, 3]), tf.TensorShape([2]) == tf.TensorShape([2])],
        "merge_conflict": error_class(lambda: a.merge_with([2, 4])),
        "dim": [str(tf.Dimension(3)), str(tf.Dimension(None)), tf.Dimension(3).value],
        "as_list_unknown": error_class(lambda: u.as_list()),
    }


PROGRAMS = [shapes_inference, shapes_tensor_shape_api]
