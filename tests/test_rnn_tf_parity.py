"""RNN cells and loops against TF 2.21 (tf.compat.v1 graph mode, tf_keras legacy cells),
TF1 where TF2 only reworded: values recorded from TF as literals (TF is never imported).
"""

import numpy as np
import pytest

import asyncflow as tf

rc = tf.nn.rnn_cell


def _dropout_lstm(**kw):
    tf.reset_default_graph()
    tf.set_random_seed(3)
    x = tf.ones([2, 2, 3])
    cell = rc.DropoutWrapper(rc.BasicLSTMCell(2), **kw)
    init = rc.LSTMStateTuple(tf.ones([2, 2]), tf.ones([2, 2]))
    # One iteration at a time: TF's draw order across parallel iterations is its
    # executor's schedule.
    out, st = tf.nn.dynamic_rnn(
        cell, x, dtype=tf.float32, parallel_iterations=1, initial_state=init
    )
    with tf.Session() as s:
        for i, v in enumerate(tf.global_variables()):
            shp = v.shape.as_list()
            n = int(np.prod(shp))
            s.run(tf.assign(v, (np.cos(np.arange(n) * 0.3 + i) * 0.5).reshape(shp)))
        return s.run([out, st])


def test_dropout_wrapper_seeds_and_state_filter_as_tf():
    o, st = _dropout_lstm(input_keep_prob=0.7, output_keep_prob=0.6, state_keep_prob=0.5, seed=2)
    np.testing.assert_allclose(
        o, [[[0.0, 0.51232], [0.22919, 0.16529]], [[0.62274, 0.51232], [0.0, 0.0]]], atol=2e-5
    )
    # c (the memory) is never dropped; h is.
    np.testing.assert_allclose(st.c, [[0.50155, 0.33441], [0.62075, 0.35332]], atol=2e-5)
    np.testing.assert_allclose(st.h, [[0.0, 0.19834], [0.0, 0.18108]], atol=2e-5)


def test_dropout_wrapper_variational_recurrent_as_tf():
    o, st = _dropout_lstm(
        input_keep_prob=0.7,
        output_keep_prob=0.6,
        state_keep_prob=0.5,
        variational_recurrent=True,
        input_size=3,
        dtype=tf.float32,
        seed=2,
    )
    np.testing.assert_allclose(
        o, [[[0.0, 0.51232], [0.0, 0.68791]], [[0.0, 0.51232], [0.0, 0.68791]]], atol=2e-5
    )
    np.testing.assert_allclose(st.c, [[1.45731, 1.29017]] * 2, atol=2e-5)
    np.testing.assert_allclose(st.h, [[0.0, 0.82549]] * 2, atol=2e-5)


@pytest.mark.parametrize(
    "kw, err, msg",
    [
        (dict(variational_recurrent=True), ValueError, "dtype must be provided"),
        (
            dict(variational_recurrent=True, input_keep_prob=0.7, dtype=tf.float32),
            ValueError,
            "input_size must be provided",
        ),
        (dict(dropout_state_filter_visitor=3), TypeError, "must be callable"),
        (dict(input_keep_prob=1.5), ValueError, "input_keep_prob must be between 0 and 1: 1"),
    ],
)
def test_dropout_wrapper_errors_as_tf(kw, err, msg):
    tf.reset_default_graph()
    with pytest.raises(err, match=msg):
        rc.DropoutWrapper(rc.GRUCell(3), **kw)


def test_dropout_wrapper_zero_state_and_kept_c_names():
    tf.reset_default_graph()
    c = rc.DropoutWrapper(rc.BasicLSTMCell(3), state_keep_prob=0.5, seed=1)
    z = c.zero_state(2, tf.float32)
    assert z.c.name == "DropoutWrapperZeroState/BasicLSTMCellZeroState/zeros:0"
    _, st = c(tf.ones([2, 3]), z)
    assert st.c.name == "basic_lstm_cell/add_1:0"


def _names():
    return [v.name for v in tf.global_variables()]


def test_new_cells_in_two_dynamic_rnns_clash_as_tf1():
    tf.reset_default_graph()
    x = tf.ones([2, 3, 4])
    tf.nn.dynamic_rnn(rc.GRUCell(3), x, dtype=tf.float32)
    with pytest.raises(ValueError, match="rnn/gru_cell/gates/kernel already exists"):
        tf.nn.dynamic_rnn(rc.GRUCell(3), x, dtype=tf.float32)


def test_new_cell_under_reusing_scope_or_reuse_true_shares_variables():
    tf.reset_default_graph()
    x = tf.ones([2, 3, 4])
    with tf.variable_scope("m"):
        tf.nn.dynamic_rnn(rc.GRUCell(3), x, dtype=tf.float32)
    with tf.variable_scope("m", reuse=True):
        tf.nn.dynamic_rnn(rc.GRUCell(3), x, dtype=tf.float32)
    tf.nn.dynamic_rnn(rc.BasicLSTMCell(3), x, dtype=tf.float32)
    tf.nn.dynamic_rnn(rc.BasicLSTMCell(3, reuse=True), x, dtype=tf.float32)
    assert _names() == [
        "m/rnn/gru_cell/gates/kernel:0",
        "m/rnn/gru_cell/gates/bias:0",
        "m/rnn/gru_cell/candidate/kernel:0",
        "m/rnn/gru_cell/candidate/bias:0",
        "rnn/basic_lstm_cell/kernel:0",
        "rnn/basic_lstm_cell/bias:0",
    ]


def test_multi_rnn_cell_zero_state_name_as_tf():
    tf.reset_default_graph()
    m = rc.MultiRNNCell([rc.BasicRNNCell(3), rc.GRUCell(2)], state_is_tuple=False)
    assert m.zero_state(5, tf.float32).name == (
        "MultiRNNCellZeroState/MultiRNNCellZeroState/zeros:0"
    )


def test_static_steps_share_the_cell_name_scope_and_cell_name():
    tf.reset_default_graph()
    c = rc.GRUCell(3)
    assert c.name == "gru_cell_1"
    _, fw, bw = tf.nn.static_bidirectional_rnn(
        c, rc.GRUCell(2), [tf.ones([2, 4])] * 2, dtype=tf.float32
    )
    assert fw.name == "bidirectional_rnn/fw/fw/gru_cell/add_1:0"
    assert bw.name == "bidirectional_rnn/bw/bw/gru_cell/add_1:0"


def _dyn(inputs, **kw):
    return lambda: tf.nn.dynamic_rnn(rc.GRUCell(3), inputs(), dtype=tf.float32, **kw)


@pytest.mark.parametrize(
    "build, err, msg",
    [
        (_dyn(lambda: tf.ones([2, 4])), ValueError, r"Shape \(4, 2\) must have rank at least 3"),
        (
            _dyn(lambda: tf.placeholder(tf.float32, [2, 3, None])),
            ValueError,
            r"Input size \(depth of inputs\) must be accessible via shape inference",
        ),
        (
            _dyn(lambda: [tf.ones([2, 3, 4]), tf.ones([3, 3, 4])]),
            ValueError,
            "Batch_size is not the same for all the elements in the input",
        ),
        (
            _dyn(lambda: [tf.ones([2, 3, 4]), tf.ones([2, 5, 4])]),
            ValueError,
            "Time steps is not the same for all the elements in the input in a batch",
        ),
        (
            lambda: tf.nn.static_rnn(
                rc.GRUCell(3), [tf.placeholder(tf.float32, [2, None])], dtype=tf.float32
            ),
            ValueError,
            r"Input size \(dimension 0 of inputs\) must be accessible via shape inference",
        ),
        (
            lambda: tf.nn.static_rnn(
                rc.GRUCell(3), [tf.ones([2, 4])], dtype=tf.float32, sequence_length=[[1, 2]]
            ),
            ValueError,
            "sequence_length must be a vector of length batch_size",
        ),
        (
            lambda: tf.nn.dynamic_rnn("x", tf.ones([2, 3, 4]), dtype=tf.float32),
            TypeError,
            "The argument 'cell' \\(x\\) is not an RNNCell: 'output_size' property is missing",
        ),
        (
            lambda: tf.nn.bidirectional_dynamic_rnn(
                rc.GRUCell(3), "x", tf.ones([2, 3, 4]), dtype=tf.float32
            ),
            TypeError,
            "The argument 'cell_bw' \\(x\\) is not an RNNCell",
        ),
        (
            lambda: rc.GRUCell(3)(tf.ones([2, 4], tf.int32), tf.zeros([2, 3], tf.int32)),
            ValueError,
            "RNN cell only supports floating point inputs",
        ),
        (
            lambda: rc.BasicLSTMCell(3)(tf.ones([2, 4]), tf.zeros([2, 6])),
            TypeError,
            "Tensor objects are only iterable when eager execution is enabled",
        ),
    ],
)
def test_build_errors_as_tf(build, err, msg):
    tf.reset_default_graph()
    with pytest.raises(err, match=msg):
        build()


X = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3) / 10.0 - 1.0


def _run_dynamic(cell):
    out, st = tf.nn.dynamic_rnn(cell, tf.constant(X), dtype=tf.float32)
    with tf.Session() as s:
        for i, v in enumerate(tf.global_variables()):
            shp = v.shape.as_list()
            n = int(np.prod(shp))
            s.run(tf.assign(v, (np.sin(np.arange(n) * 0.7 + i) * 0.5).reshape(shp)))
        return s.run([out, st])


class MyCell(rc.RNNCell):
    """A TF1-style user cell: build(inputs_shape) + add_variable, then call."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    state_size = property(lambda self: self.n)
    output_size = property(lambda self: self.n)

    def build(self, inputs_shape):
        self.k = self.add_variable("k", [inputs_shape[-1] + self.n, self.n])
        self.built = True

    def call(self, inputs, state):
        h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), self.k))
        return h, h


class MyGetVariableCell(rc.RNNCell):
    """A user cell with only `call`, making its variable by tf.get_variable."""

    state_size = property(lambda self: 3)
    output_size = property(lambda self: 3)

    def call(self, inputs, state):
        k = tf.get_variable("k", [inputs.shape[-1] + 3, 3])
        h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), k))
        return h, h


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: MyCell(3), "rnn/my_cell/k:0"),
        (MyGetVariableCell, "rnn/my_get_variable_cell/k:0"),
    ],
)
def test_user_cells_build_and_call_as_tf(make, name):
    tf.reset_default_graph()
    out, st = _run_dynamic(make())
    assert [v.name for v in tf.global_variables()] == [name]
    np.testing.assert_allclose(
        out[1], [[-0.0448, -0.08164, -0.08015], [-0.04606, -0.07069, -0.06214],
                 [-0.05056, -0.07862, -0.06979], [-0.05187, -0.07811, -0.0677]], atol=2e-5
    )  # fmt: skip
    np.testing.assert_allclose(st[1], [-0.05187, -0.07811, -0.0677], atol=2e-5)


def test_activation_names_and_unit_shards_as_tf1():
    tf.reset_default_graph()
    out, _ = _run_dynamic(rc.GRUCell(3, activation="relu"))
    np.testing.assert_allclose(out[0, :, 0], [0.00897, 0.0152, 0.01971, 0.02315], atol=2e-5)
    assert (out[:, :, 1:] == 0).all()
    tf.reset_default_graph()
    tf.nn.dynamic_rnn(rc.LSTMCell(3, num_unit_shards=2), tf.constant(X), dtype=tf.float32)
    assert [(v.name, v.shape.as_list()) for v in tf.global_variables()] == [
        ("rnn/lstm_cell/kernel/part_0:0", [3, 12]),
        ("rnn/lstm_cell/kernel/part_1:0", [3, 12]),
        ("rnn/lstm_cell/bias:0", [12]),
    ]


def test_get_initial_state_and_cell_variables_as_tf():
    tf.reset_default_graph()
    c = rc.BasicLSTMCell(3)
    z = c.get_initial_state(inputs=tf.ones([5, 2]))
    assert z.c.shape.as_list() == [5, 3] and z.c.dtype == tf.float32
    with pytest.raises(ValueError, match="Input tensor batch: 5, batch_size: 4"):
        rc.GRUCell(3).get_initial_state(inputs=tf.ones([5, 2]), batch_size=4, dtype=tf.float32)
    m = rc.MultiRNNCell([rc.GRUCell(2), rc.BasicLSTMCell(2)])
    assert not m.built
    tf.nn.dynamic_rnn(m, tf.constant(X), dtype=tf.float32)
    assert m.built
    names = [v.name for v in m.trainable_variables]
    assert names == [v.name for v in m.weights] == [v.name for v in m.variables]
    assert names[-1] == "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/bias:0" and len(names) == 6


def test_wrappers_expose_their_cell():
    tf.reset_default_graph()
    g = rc.GRUCell(3)
    assert rc.DropoutWrapper(g).wrapped_cell is g and rc.DropoutWrapper(g).cell is g
    assert rc.ResidualWrapper(g).cell is g and rc.DeviceWrapper(g, "/cpu:0").cell is g


def test_fed_sequence_length_of_wrong_length_fails_as_tf():
    tf.reset_default_graph()
    sl = tf.placeholder(tf.int32, [None])
    _, st = tf.nn.dynamic_rnn(rc.GRUCell(2), tf.constant(X), sequence_length=sl, dtype=tf.float32)
    assert tf.get_default_graph().get_operation_by_name("rnn/CheckSeqLen").type == "Identity"
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"Expected shape for Tensor rnn/sequence_length:0 is \] \[2\] "
            r"\[ but saw shape: \] \[3\]",
        ):
            s.run(st, {sl: [1, 2, 3]})


def test_multi_cell_and_static_batch_errors_as_tf():
    tf.reset_default_graph()
    m = rc.MultiRNNCell([rc.GRUCell(2), rc.GRUCell(2)])
    with pytest.raises(ValueError, match="Expected state to be a tuple of length 2"):
        m(tf.ones([2, 3]), tf.zeros([2, 4]))
    with pytest.raises(ValueError, match="Dimensions 2 and 3 are not compatible"):
        tf.nn.static_rnn(rc.GRUCell(2), [tf.ones([2, 3]), tf.ones([3, 3])], dtype=tf.float32)


class MyScopedCell(rc.RNNCell):
    """A user cell overriding __call__ and calling tf.get_variable itself."""

    state_size = property(lambda self: 3)
    output_size = property(lambda self: 3)

    def __call__(self, inputs, state, scope=None):
        with tf.variable_scope(scope or "mycell"):
            init = tf.constant_initializer(0.1)
            k = tf.get_variable("k", [inputs.shape[-1] + 3, 3], initializer=init)
            h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), k))
        return h, h


def test_static_rnn_steps_reuse_a_user_cells_get_variable_as_tf():
    tf.reset_default_graph()
    _, st = tf.nn.static_rnn(MyScopedCell(), [tf.ones([2, 4])] * 3, dtype=tf.float32)
    assert [v.name for v in tf.global_variables()] == ["rnn/mycell/k:0"]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        np.testing.assert_allclose(s.run(st), np.full([2, 3], 0.49443492), rtol=1e-5)
