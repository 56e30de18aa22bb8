"""Array manipulation: reshape, transpose, concat/split/stack, gather, one_hot, tile, pad..."""

from tf1_programs._common import run


def array_reshape_transpose(tf):
    x = tf.reshape(tf.range(24), [2, 3, 4])
    fetches = {
        "reshape_neg1": tf.reshape(x, [4, -1]),
        "reshape_flat": tf.reshape(x, [-1]),
        "reshape_tensor_shape": tf.reshape(x, tf.constant([6, 4])),
        "reshape_scalar": tf.reshape(tf.constant([5]), []),
        "transpose_default": tf.transpose(x),
        "transpose_perm": tf.transpose(x, [1, 0, 2]),
        "transpose_2d": tf.transpose(tf.constant([[1, 2, 3], [4, 5, 6]])),
        "expand_0": tf.expand_dims(x, 0),
        "expand_neg1": tf.expand_dims(tf.constant([1, 2]), -1),
        "squeeze_all": tf.squeeze(tf.zeros([1, 2, 1, 3])),
        "squeeze_axis": tf.squeeze(tf.zeros([1, 2, 1, 3]), axis=[2]),
        "reverse": tf.reverse(x, axis=[0, 2]),
        "identity": tf.identity(x),
        "identity_n": tf.identity_n([tf.constant(1), tf.constant([2.0, 3.0])]),
    }
    return run(tf, fetches)


def array_concat_split_stack(tf):
    a = tf.constant([[1, 2], [3, 4]])
    b = tf.constant([[5, 6], [7, 8]])
    c = tf.reshape(tf.range(12.0), [2, 6])
    fetches = {
        "concat_0": tf.concat([a, b], 0),
        "concat_1": tf.concat([a, b], axis=1),
        "concat_neg1": tf.concat([a, b, a], -1),
        "concat_single": tf.concat([a], 0),
        "split_num": tf.split(c, 3, axis=1),
        "split_sizes": tf.split(c, [1, 2, 3], 1),
        "split_neg1": tf.split(c, [4, -1], axis=1),
        "split_axis0": tf.split(c, 2),
        "stack_0": tf.stack([a, b]),
        "stack_1": tf.stack([a, b], axis=1),
        "stack_neg1": tf.stack([tf.constant([1, 2]), tf.constant([3, 4])], axis=-1),
        "unstack_0": tf.unstack(a),
        "unstack_1": tf.unstack(c, axis=1),
    }
    return run(tf, fetches)


def array_gather_onehot_tile_pad(tf):
    params = tf.constant([[10, 11, 12], [20, 21, 22], [30, 31, 32]])
    m = tf.constant([[1, 2, 3], [4, 5, 6]])
    fetches = {
        "gather_0": tf.gather(params, [2, 0, 2]),
        "gather_1": tf.gather(params, [1, 0], axis=1),
        "gather_2d_idx": tf.gather(params, [[0, 1], [2, 2]]),
        "gather_scalar": tf.gather(params, 1),
        "gather_vec": tf.gather(tf.constant([1.5, 2.5, 3.5]), tf.constant([2, 0], tf.int64)),
        "one_hot": tf.one_hot([0, 2, -1, 1], 3),
        "one_hot_vals": tf.one_hot([1, 0], 3, on_value=5, off_value=-1),
        "one_hot_axis0": tf.one_hot([0, 2], 3, axis=0),
        "one_hot_2d": tf.one_hot([[0, 1], [2, 3]], 4, dtype=tf.int32),
        "tile": tf.tile(m, [2, 2]),
        "tile_1d": tf.tile(tf.constant([1, 2]), [3]),
        "pad_const": tf.pad(m, [[1, 0], [0, 2]]),
        "pad_value": tf.pad(m, [[0, 1], [1, 1]], constant_values=9),
        "pad_reflect": tf.pad(m, [[1, 1], [2, 2]], "REFLECT"),
        "pad_symmetric": tf.pad(m, [[1, 1], [2, 2]], mode="SYMMETRIC"),
    }
    return run(tf, fetches)


def array_creation_where(tf):
    cond = tf.constant([[True, False], [False, True]])
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    fetches = {
        "where_1arg": tf.where(cond),
        "where_3arg": tf.where(cond, x, -x),
        "where_vec_cond": tf.where(tf.constant([True, False]), x, tf.zeros_like(x)),
        "where_1arg_int": tf.where(tf.constant([0, 3, 0, -1])),
        "fill": tf.fill([2, 3], 7),
        "fill_f": tf.fill([2], 0.5),
        "zeros": tf.zeros([2, 2], tf.int32),
        "ones": tf.ones([3]),
        "zeros_like": tf.zeros_like(tf.constant([1, 2])),
        "ones_like_f": tf.ones_like(x),
        "range_5": tf.range(5),
        "range_step": tf.range(1, 10, 3),
        "range_neg": tf.range(5, 0, -2),
        "range_float": tf.range(0.0, 1.0, 0.25),
        "linspace": tf.linspace(0.0, 1.0, 5),
        "constant_fill": tf.constant(3, shape=[2, 2]),
        "constant_list_shape": tf.constant([1.0, 2.0], shape=[2, 1]),
        "shape": tf.shape(x),
        "shape_i64": tf.shape(x, out_type=tf.int64),
        "shape_n": tf.shape_n([x, tf.constant([1.0, 2.0, 3.0])]),
        "size": tf.size(x),
        "rank": tf.rank(x),
        "slice": tf.slice(tf.reshape(tf.range(12), [3, 4]), [1, 1], [2, -1]),
    }
    return run(tf, fetches)


PROGRAMS = [
    array_reshape_transpose,
    array_concat_split_stack,
    array_gather_onehot_tile_pad,
    array_creation_where,
]
