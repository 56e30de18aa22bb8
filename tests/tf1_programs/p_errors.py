"""Error classes: build-time ValueError/TypeError and run-time OpError subclasses."""

from tf1_programs._common import error_class, run


def errors_build_time(tf):
    f2x3 = tf.ones([2, 3])
    f3x2 = tf.ones([3, 2])
    i = tf.constant([1, 2, 3])
    cases = {
        "add_incompatible": lambda: f2x3 + f3x2,
        "mul_incompatible_1d": lambda: tf.ones([3]) * tf.ones([4]),
        "mix_dtypes_add": lambda: f2x3 + tf.ones([2, 3], tf.int32),
        "mix_dtypes_op_int_pyfloat": lambda: i + 2.5,
        "mix_f32_f64": lambda: tf.constant(1.0) + tf.constant(1.0, tf.float64),
        "constant_bad_value": lambda: tf.constant(2.5, dtype=tf.int32),
        "constant_str_as_float": lambda: tf.constant("x", dtype=tf.float32),
        "constant_ragged": lambda: tf.constant([[1, 2], [3]]),
        "reshape_bad_size": lambda: tf.reshape(f2x3, [4, 2]),
        "concat_rank_mismatch": lambda: tf.concat([f2x3, tf.ones([3])], 0),
        "concat_dim_mismatch": lambda: tf.concat([f2x3, f3x2], 0),
        "concat_dtype_mismatch": lambda: tf.concat([i, tf.ones([3])], 0),
        "split_uneven": lambda: tf.split(tf.ones([5]), 2),
        "stack_shape_mismatch": lambda: tf.stack([tf.ones([2]), tf.ones([3])]),
        "transpose_bad_perm": lambda: tf.transpose(f2x3, [0, 0]),
        "squeeze_non1": lambda: tf.squeeze(f2x3, axis=[0]),
        "reduce_bad_axis": lambda: tf.reduce_sum(f2x3, axis=2),
        "gather_bad_axis": lambda: tf.gather(f2x3, [0], axis=3),
        "getitem_out_of_range": lambda: f2x3[5],
        "getitem_too_many": lambda: f2x3[0, 0, 0],
        "getitem_float_index": lambda: f2x3[1.5],
        "logical_on_float": lambda: tf.logical_and(f2x3, f2x3),
        "invert_float": lambda: ~f2x3,
        "matmul_inner": lambda: tf.matmul(f2x3, f2x3),
        "pad_bad_paddings": lambda: tf.pad(f2x3, [[1, 1]]),
        "one_hot_float_indices": lambda: tf.one_hot(tf.ones([2]), 3),
        "tile_bad_multiples": lambda: tf.tile(f2x3, [2]),
        "run_missing_feed": lambda: run(tf, tf.placeholder(tf.float32, [2]) * 1.0),
        "assign_shape_mismatch": lambda: tf.assign(tf.Variable([1.0, 2.0]), [1.0, 2.0, 3.0]),
        "assign_dtype_mismatch": lambda: tf.assign(tf.Variable([1.0, 2.0]), [1, 2]),
        "where_shape_mismatch": lambda: tf.where(tf.constant([True, False]), f2x3, f3x2),
        "add_n_shape_mismatch": lambda: tf.add_n([f2x3, f3x2]),
        "unstack_unknown_num": lambda: tf.unstack(tf.placeholder(tf.float32, [None])),
    }
    return {k: error_class(fn) for k, fn in cases.items()}


def errors_reshape_two_unknown_dims(tf):
    """Two -1 sizes: TF builds it (shape unknown) and fails at run time."""
    ph = tf.placeholder(tf.float32, [2, 3])
    out = {}
    try:
        r = tf.reshape(ph, [-1, -1])
    except Exception as exc:  # noqa: BLE001 - the class name is the result
        return {"build": type(exc).__name__}
    out["build"] = None
    out["shape"] = str(r.shape)
    out["run"] = error_class(lambda: run(tf, r, {ph: [[1.0] * 3] * 2}))
    return out


def errors_feed_checks(tf):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = x * 2.0
    n = tf.placeholder(tf.int32, [3])
    out = {}
    with tf.Session() as sess:
        out["ok"] = sess.run(y, {x: [[1.0, 2.0]]})
        out["wrong_shape"] = error_class(lambda: sess.run(y, {x: [1.0, 2.0]}))
        out["wrong_shape_dim"] = error_class(lambda: sess.run(y, {x: [[1.0, 2.0, 3.0]]}))
        out["wrong_len"] = error_class(lambda: sess.run(n * 2, {n: [1, 2]}))
        out["string_for_float"] = error_class(lambda: sess.run(y, {x: [["a", "b"]]}))
        out["missing_feed"] = error_class(lambda: sess.run(y))
        out["missing_feed_2"] = error_class(lambda: sess.run(n + 1))
        out["feed_unknown_name"] = error_class(lambda: sess.run(y, {"nope:0": 1.0}))
        out["feed_tensor_as_value"] = error_class(lambda: sess.run(y, {x: tf.ones([1, 2])}))
        out["fetch_unknown_name"] = error_class(lambda: sess.run("nope:0"))
        out["still_ok"] = sess.run(y, {x: [[3.0, 4.0]]})
    return out


def errors_run_time(tf):
    params = tf.constant([1.0, 2.0, 3.0])
    idx = tf.placeholder(tf.int32, [None])
    a = tf.placeholder(tf.float32, [None])
    b = tf.placeholder(tf.float32, [None])
    r = tf.placeholder(tf.float32, [None])
    iv = tf.placeholder(tf.int32, [None])
    v = tf.Variable([1.0, 2.0])
    u = tf.Variable(0)
    w = tf.Variable([1, 2])
    out = {}
    with tf.Session() as sess:
        sess.run(w.initializer)
        cases = {
            "gather_bad_index": lambda: sess.run(tf.gather(params, idx), {idx: [0, 5]}),
            "gather_negative": lambda: sess.run(tf.gather(params, idx), {idx: [-1]}),
            "add_runtime_shapes": lambda: sess.run(a + b, {a: [1.0, 2.0], b: [1.0, 2.0, 3.0]}),
            "reshape_runtime": lambda: sess.run(tf.reshape(r, [2, 2]), {r: [1.0, 2.0, 3.0]}),
            "int_div_zero": lambda: sess.run(iv // tf.constant([0, 1]), {iv: [1, 2]}),
            "int_mod_zero": lambda: sess.run(iv % tf.constant([0, 1]), {iv: [1, 2]}),
            "uninitialized_read": lambda: sess.run(v),
            "uninitialized_assign_add": lambda: sess.run(tf.assign_add(u, 1)),
            "check_numerics": lambda: sess.run(
                tf.check_numerics(a / b, "bad"), {a: [1.0], b: [0.0]}
            ),
            "assert_equal": lambda: sess.run(tf.assert_equal(iv, 1), {iv: [1, 2]}),
            "assert_positive": lambda: sess.run(tf.assert_positive(a), {a: [1.0, -1.0]}),
            "Assert_op": lambda: sess.run(tf.Assert(tf.reduce_all(a > 0), [a]), {a: [-1.0]}),
            "scatter_bad_index": lambda: sess.run(tf.scatter_update(w, [5], [0])),
            "split_runtime": lambda: sess.run(tf.split(r, 2), {r: [1.0, 2.0, 3.0]}),
            "concat_runtime": lambda: sess.run(
                tf.concat([tf.reshape(r, [1, -1]), tf.ones([1, 2])], 0), {r: [1.0, 2.0, 3.0]}
            ),
            "matmul_runtime": lambda: sess.run(
                tf.matmul(tf.reshape(r, [1, -1]), tf.ones([2, 1])), {r: [1.0, 2.0, 3.0]}
            ),
            "one_hot_neg_depth": lambda: sess.run(tf.one_hot([0], iv[0]), {iv: [-1]}),
            "range_zero_delta": lambda: sess.run(tf.range(0, 5, iv[0]), {iv: [0]}),
            "slice_out_of_bounds": lambda: sess.run(tf.slice(r, [2], [3]), {r: [1.0, 2.0, 3.0]}),
            "tile_bad_multiples_runtime": lambda: sess.run(tf.tile(r, iv), {r: [1.0], iv: [1, 2]}),
        }
        out = {k: error_class(fn) for k, fn in cases.items()}
        sess.run(tf.variables_initializer([v]))
        out["after_errors"] = sess.run(tf.gather(params, idx), {idx: [2]})
        out["v_after"] = sess.run(v)
    return out


def errors_assert_ok_paths(tf):
    a = tf.placeholder(tf.float32, [None])
    with tf.control_dependencies([tf.assert_positive(a), tf.assert_less(a, 10.0)]):
        y = tf.identity(a) * 2.0
    checked = tf.check_numerics(a, "msg")
    out = {}
    with tf.Session() as sess:
        out["ok"] = sess.run(y, {a: [1.0, 2.0]})
        out["checked"] = sess.run(checked, {a: [3.0]})
        out["fails"] = error_class(lambda: sess.run(y, {a: [20.0]}))
        out["checked_nan"] = error_class(lambda: sess.run(checked, {a: [float("nan")]}))
    return out


PROGRAMS = [
    errors_build_time,
    errors_reshape_two_unknown_dims,
    errors_feed_checks,
    errors_run_time,
    errors_assert_ok_paths,
]
