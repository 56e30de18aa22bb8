"""Reductions with axis and keepdims; argmax/argmin."""

from tf1_programs._common import run


def reductions_axes(tf):
    x = tf.constant(
        [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0, 8.0], [9.0, 10.0], [11.0, 12.5]]]
    )
    fetches = {
        "sum_all": tf.reduce_sum(x),
        "sum_0": tf.reduce_sum(x, axis=0),
        "sum_1_keep": tf.reduce_sum(x, axis=1, keepdims=True),
        "sum_neg1": tf.reduce_sum(x, -1),
        "sum_list": tf.reduce_sum(x, axis=[0, 2]),
        "sum_list_keep": tf.reduce_sum(x, axis=[0, -1], keepdims=True),
        "sum_empty_axis": tf.reduce_sum(x, axis=[]),
        "sum_tensor_axis": tf.reduce_sum(x, axis=tf.constant([1])),
        "mean_all": tf.reduce_mean(x),
        "mean_2": tf.reduce_mean(x, axis=2),
        "max_1": tf.reduce_max(x, axis=1),
        "min_keep": tf.reduce_min(x, axis=0, keepdims=True),
        "prod_2": tf.reduce_prod(x, 2),
    }
    return run(tf, fetches)


def reductions_int_bool_arg(tf):
    i = tf.constant([[1, 2, 4], [3, 5, 7]])
    b = tf.constant([[True, False, True], [True, True, True]])
    t = tf.constant([[3, 1, 3], [0, 0, -1]])
    fetches = {
        "int_mean": tf.reduce_mean(i),
        "int_mean_0": tf.reduce_mean(i, axis=0),
        "int_sum": tf.reduce_sum(i, axis=1),
        "int_prod": tf.reduce_prod(i),
        "any_1": tf.reduce_any(b, axis=1),
        "all_1": tf.reduce_all(b, axis=1),
        "all": tf.reduce_all(b),
        "any_keep": tf.reduce_any(b, axis=0, keepdims=True),
        "argmax_0": tf.argmax(t, axis=0),
        "argmax_1_ties": tf.argmax(t, axis=1),
        "argmin_1_ties": tf.argmin(t, axis=1),
        "argmax_i32": tf.argmax(t, axis=1, output_type=tf.int32),
        "argmax_float": tf.argmax(tf.constant([0.5, 2.5, 2.5, -1.0]), 0),
    }
    return run(tf, fetches)


def reductions_static_shapes(tf):
    p = tf.placeholder(tf.float32, shape=[None, 3, 4])
    out = {
        "sum_all": tf.reduce_sum(p),
        "sum_0": tf.reduce_sum(p, 0),
        "sum_1": tf.reduce_sum(p, 1),
        "sum_1_keep": tf.reduce_sum(p, 1, keepdims=True),
        "mean_list": tf.reduce_mean(p, [0, 2]),
        "max_keep_all": tf.reduce_max(p, keepdims=True),
        "argmax_2": tf.argmax(p, 2),
        "argmin_0": tf.argmin(p, 0),
    }
    shapes = {k: str(v.shape) for k, v in out.items()}
    shapes["argmax_dtype"] = out["argmax_2"].dtype.name
    feed = {p: [[[float(i + j + k) for k in range(4)] for j in range(3)] for i in range(2)]}
    shapes["run"] = run(tf, out, feed)
    return shapes


PROGRAMS = [reductions_axes, reductions_int_bool_arg, reductions_static_shapes]
