"""matmul: transposes, batched, the @ operator, static shapes and build errors."""

from tf1_programs._common import error_class, run


def matmul_variants(tf):
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # 2x3
    b = tf.constant([[1.0, 0.5], [-1.0, 2.0], [0.0, 3.0]])  # 3x2
    bt = tf.transpose(b)
    at = tf.transpose(a)
    batch = tf.reshape(tf.range(24.0), [2, 3, 4])
    batch_b = tf.reshape(tf.range(16.0), [2, 4, 2])
    fetches = {
        "ab": tf.matmul(a, b),
        "at_ta": tf.matmul(at, b, transpose_a=True),
        "a_btT": tf.matmul(a, bt, transpose_b=True),
        "both": tf.matmul(at, bt, transpose_a=True, transpose_b=True),
        "op": a @ b,
        "int": tf.matmul(tf.constant([[1, 2], [3, 4]]), tf.constant([[5], [6]])),
        "batched": tf.matmul(batch, batch_b),
        "batched_tb": tf.matmul(batch, batch, transpose_b=True),
        "f64": tf.matmul(
            tf.constant([[0.1, 0.2]], tf.float64), tf.constant([[3.0], [7.0]], tf.float64)
        ),
    }
    return run(tf, fetches)


def matmul_shapes_errors(tf):
    p = tf.placeholder(tf.float32, [None, 3])
    q = tf.placeholder(tf.float32, [3, None])
    r = tf.placeholder(tf.float32)
    w = tf.ones([3, 5])
    bp = tf.placeholder(tf.float32, [None, 4, 3])
    out = {
        "p_w": str(tf.matmul(p, w).shape),
        "p_q": str(tf.matmul(p, q).shape),
        "p_r": str(tf.matmul(p, r).shape),
        "w_p_tb": str(tf.matmul(w, p, transpose_a=True, transpose_b=True).shape),
        "batched": str(tf.matmul(bp, w).shape),
        "dtype": tf.matmul(p, w).dtype.name,
    }
    out["inner_mismatch"] = error_class(lambda: tf.matmul(w, w))
    out["rank1"] = error_class(lambda: tf.matmul(tf.constant([1.0, 2.0]), w))
    out["dtype_mix"] = error_class(lambda: tf.matmul(tf.ones([2, 3]), tf.ones([3, 2], tf.int32)))
    out["run"] = run(tf, tf.matmul(p, w), {p: [[1.0, 2.0, 3.0]]})
    out["run_bad_feed"] = error_class(lambda: run(tf, tf.matmul(r, w), {r: [[1.0, 2.0]]}))
    return out


PROGRAMS = [matmul_variants, matmul_shapes_errors]
