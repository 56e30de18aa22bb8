"""RNN cells (`af.nn.rnn_cell`, TF1's rnn_cell_impl): BasicRNNCell, BasicLSTMCell,
LSTMCell, GRUCell, MultiRNNCell, DropoutWrapper, DeviceWrapper, ResidualWrapper,
LSTMStateTuple.

A cell is called as `output, new_state = cell(inputs, state)`.  Its variables are made
on the first call, under the enclosing variable scope and the cell's own scope name
("basic_lstm_cell", "lstm_cell", "gru_cell", "basic_rnn_cell"), so `dynamic_rnn` gives
TF's names: rnn/basic_lstm_cell/kernel, bias.  As TF1's layers, that scope is fixed on
the first call as a `default_name` scope: unique only while the enclosing scope stays
open, so two new cells in two `dynamic_rnn` calls both ask for rnn/<cell>/kernel (TF's
"already exists" error unless the scope reuses), and a cell made with `reuse=True` takes
the plain name.  Later calls reuse the variables (a cell is one layer) and put their ops
in the first call's name scope (static_rnn's step t is rnn/gru_cell/add_t).  Variables
are created outside any cond/while context (TF's `init_scope`), so a cell first called
inside a loop body still gets ordinary variables.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import re

from asyncflow import dtypes, nest, partitioned_variables
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.ops import array_ops, init_ops, math_ops, nn_impl, nn_ops, random_ops

__all__ = [
    "RNNCell",
    "BasicRNNCell",
    "BasicLSTMCell",
    "LSTMCell",
    "GRUCell",
    "MultiRNNCell",
    "DropoutWrapper",
    "DeviceWrapper",
    "ResidualWrapper",
    "LSTMStateTuple",
]


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """(c, h): the cell state and the output of an LSTM."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


def _state_pair(state):
    """(c, h) of a tuple state; a lone Tensor cannot be unpacked in graph mode (TF's
    TypeError)."""
    if isinstance(state, ops.Tensor):
        raise TypeError(
            "Tensor objects are only iterable when eager execution is enabled. "
            "To iterate over this tensor use tf.map_fn."
        )
    return state


def _zero_state_tensors(state_size, batch_size, dtype):
    def one(n):
        shape = [batch_size, n]
        if all(isinstance(d, int) for d in shape):
            return array_ops.zeros(shape, dtype)
        return array_ops.zeros(array_ops.stack(shape), dtype)

    return nest.map_structure(one, state_size)


_layer_names = "rnn_cell_layer_names"


def _unique_layer_name(base: str) -> str:
    """A layer's `name` as TF1's layers give it: base_1, base_2, ... per graph."""
    counts = ops.get_default_graph()._attached.setdefault(_layer_names, {})
    counts[base] = counts.get(base, 0) + 1
    return f"{base}_{counts[base]}"


def _snake_case(class_name: str) -> str:
    """A layer's base name from its class name, as TF's layers make it (GRUCell ->
    gru_cell, BasicLSTMCell -> basic_lstm_cell, MyCell3 -> my_cell3)."""
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", class_name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if not s.startswith("_") else "private" + s


_ACTIVATIONS = {
    "tanh": math_ops.tanh,
    "sigmoid": math_ops.sigmoid,
    "relu": nn_ops.relu,
    "elu": nn_ops.elu,
    "selu": nn_ops.selu,
    "softplus": nn_ops.softplus,
    "softsign": nn_ops.softsign,
    "exponential": math_ops.exp,
    "linear": lambda x: x,
}


def _activation(activation, default=math_ops.tanh):
    """A cell's activation: a callable, a Keras activation name, or None for tanh.

    Raises:
      ValueError: an unknown activation name.
    """
    if not activation:
        return default
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"Unknown activation function:{activation}")
        return _ACTIVATIONS[activation]
    return activation


def _input_depth(cell, inputs_shape) -> int:
    """The last input dimension a built-in cell sizes its kernel with.

    Raises:
      ValueError: unknown depth, or a non-floating cell dtype (TF1's checks).
    """
    from asyncflow import tensor_shape

    inputs_shape = tensor_shape.as_shape(inputs_shape)
    depth = inputs_shape[-1].value if inputs_shape.ndims else None
    if depth is None:
        raise ValueError(f"Expected inputs.shape[-1] to be known, saw shape: {inputs_shape}")
    if not (cell._dtype.is_floating or cell._dtype.is_complex):
        raise ValueError(
            f"RNN cell only supports floating point inputs, but saw dtype: {cell._dtype}"
        )
    return depth


class RNNCell:
    """Base class, as TF1's RNNCell layer: subclasses define `state_size`,
    `output_size` and either `call(inputs, state)` (with `build(inputs_shape)` making
    variables by `add_variable`, or `tf.get_variable` inside `call`) or `__call__`.
    """

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        self._reuse = kwargs.pop("_reuse", None)
        base = _snake_case(type(self).__name__)
        self._base_name = name or base
        self._name = name or _unique_layer_name(base)
        self._dtype = dtypes.as_dtype(dtype) if dtype is not None else None
        self._trainable = trainable
        self._scope = None
        self._built = False
        self._variables: list = []

    name = property(lambda self: self._name)
    dtype = property(lambda self: self._dtype)

    @property
    def built(self) -> bool:
        return self._built

    @built.setter
    def built(self, value: bool) -> None:
        self._built = value

    @property
    def state_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def variables(self) -> list:
        return list(self._variables)

    trainable_variables = property(lambda self: self.variables)
    weights = property(lambda self: self.variables)
    trainable_weights = property(lambda self: self.variables)

    def build(self, inputs_shape) -> None:
        """Makes the cell's variables (`add_variable`); the default makes none."""

    def call(self, inputs, state):
        raise NotImplementedError

    def add_variable(
        self, name, shape, dtype=None, initializer=None, trainable=None, partitioner=None
    ):
        """A variable of this cell under its scope, made outside any loop (TF's
        `add_weight`)."""
        graph = ops.get_default_graph()
        saved = graph._control_flow_context
        graph._control_flow_context = None  # variables live outside loops (init_scope)
        try:
            with graph.control_dependencies(None):
                v = vs.get_variable(
                    name,
                    shape,
                    dtype=dtype or self._dtype,
                    initializer=initializer,
                    trainable=trainable,
                    partitioner=partitioner,
                )
        finally:
            graph._control_flow_context = saved
        parted = isinstance(v, partitioned_variables.PartitionedVariable)
        self._variables.extend(list(v) if parted else [v])
        return v

    add_weight = add_variable

    def _add_variable(self, name, shape, initializer=None, partitioner=None):
        v = self.add_variable(name, shape, initializer=initializer, partitioner=partitioner)
        if isinstance(v, partitioned_variables.PartitionedVariable):
            return v
        # Built-in cells compute with the variable's snapshot ("<name>/read", outside any
        # loop), as TF's conversion of a Variable does.
        return v.value() if hasattr(v, "value") else v

    def _cell_scope(self, scope):
        """The variable scope fixed on the first call (TF1 layers' `_set_scope`)."""
        if self._scope is None:
            if scope is not None or self._reuse:
                ctx = vs.variable_scope(scope if scope is not None else self._base_name)
            else:
                ctx = vs.variable_scope(None, default_name=self._base_name)
            with ctx as captured:
                self._scope = captured
        return self._scope

    @contextlib.contextmanager
    def _entered(self, scope):
        """Inside the cell's variable scope (reusing once built) and its first name scope."""
        captured = self._cell_scope(scope)
        reuse = True if self._built else self._reuse
        with vs.variable_scope(captured, reuse=reuse, auxiliary_name_scope=False):
            with ops.name_scope(captured.original_name_scope):
                yield

    def __call__(self, inputs, state, scope=None):
        inputs = ops.convert_to_tensor(inputs) if not nest.is_nested(inputs) else inputs
        with self._entered(scope):
            if not self._built:
                if self._dtype is None:
                    self._dtype = nest.flatten(inputs)[0].dtype
                self.build(nest.map_structure(lambda x: x.shape, inputs))
                self._built = True
            return self.call(inputs, state)

    def zero_state(self, batch_size, dtype):
        """All-zero state(s) for a batch (`type(cell).__name__ + 'ZeroState'` scope)."""
        with ops.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            return _zero_state_tensors(self.state_size, batch_size, dtype)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """zero_state for `inputs`' batch and dtype (or the given ones).

        Raises:
          ValueError: a batch_size or dtype that disagrees with `inputs`.
        """
        if inputs is not None:
            inputs = ops.convert_to_tensor(inputs)
            static_batch = inputs.shape[0].value if inputs.shape.ndims else None
            if batch_size is not None:
                given = ops.constant_value(ops.convert_to_tensor(batch_size))
                if static_batch is not None and given is not None and static_batch != given:
                    raise ValueError(
                        "batch size from input tensor is different from the input param. "
                        f"Input tensor batch: {static_batch}, batch_size: {int(given)}"
                    )
            if dtype is not None and inputs.dtype != dtypes.as_dtype(dtype):
                raise ValueError(
                    "dtype from input tensor is different from the input param. Input "
                    f"tensor dtype: {inputs.dtype}, dtype: {dtypes.as_dtype(dtype)}"
                )
            if static_batch is not None:
                batch_size = static_batch
            else:
                batch_size = array_ops.shape(inputs)[0]
            dtype = inputs.dtype
        if batch_size is None or dtype is None:
            raise ValueError(
                "batch_size and dtype cannot be None while constructing initial state: "
                f"batch_size={batch_size}, dtype={dtype}"
            )
        return self.zero_state(batch_size, dtype)


class BasicRNNCell(RNNCell):
    """output = new_state = act(W [inputs, state] + b)."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype, _reuse=reuse)
        self._num_units = num_units
        self._activation = _activation(activation)

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        input_depth = _input_depth(self, inputs_shape)
        n = self._num_units
        self._kernel = self._add_variable("kernel", [input_depth + n, n])
        self._bias = self._add_variable("bias", [n], initializer=init_ops.zeros_initializer())

    def call(self, inputs, state):
        gate = math_ops.matmul(array_ops.concat([inputs, state], 1), self._kernel)
        out = self._activation(nn_ops.bias_add(gate, self._bias))
        return out, out


class BasicLSTMCell(RNNCell):
    """TF1's BasicLSTMCell: gates i, j, f, o from one matmul; forget_bias added to f."""

    def __init__(
        self,
        num_units,
        forget_bias=1.0,
        state_is_tuple=True,
        activation=None,
        reuse=None,
        name=None,
        dtype=None,
    ):
        super().__init__(name=name, dtype=dtype, _reuse=reuse)
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        input_depth = _input_depth(self, inputs_shape)
        n = self._num_units
        self._kernel = self._add_variable("kernel", [input_depth + n, 4 * n])
        self._bias = self._add_variable("bias", [4 * n], initializer=init_ops.zeros_initializer())

    def call(self, inputs, state):
        if self._state_is_tuple:
            c, h = _state_pair(state)
        else:
            c, h = array_ops.split(state, 2, axis=1)
        gates = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, h], 1), self._kernel), self._bias
        )
        i, j, f, o = array_ops.split(gates, 4, axis=1)
        forget = array_ops.constant(self._forget_bias, dtype=f.dtype)
        new_c = c * math_ops.sigmoid(f + forget) + math_ops.sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * math_ops.sigmoid(o)
        if self._state_is_tuple:
            return new_h, LSTMStateTuple(new_c, new_h)
        return new_h, array_ops.concat([new_c, new_h], 1)


class LSTMCell(RNNCell):
    """TF1's LSTMCell: optional peepholes, cell clipping and an output projection."""

    def __init__(
        self,
        num_units,
        use_peepholes=False,
        cell_clip=None,
        initializer=None,
        num_proj=None,
        proj_clip=None,
        num_unit_shards=None,
        num_proj_shards=None,
        forget_bias=1.0,
        state_is_tuple=True,
        activation=None,
        reuse=None,
        name=None,
        dtype=None,
    ):
        super().__init__(name=name, dtype=dtype, _reuse=reuse)
        self._num_unit_shards = num_unit_shards
        self._num_proj_shards = num_proj_shards
        self._num_units = num_units
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n, m = self._num_units, self._num_proj or self._num_units
        return LSTMStateTuple(n, m) if self._state_is_tuple else n + m

    output_size = property(lambda self: self._num_proj or self._num_units)

    def build(self, inputs_shape):
        input_depth = _input_depth(self, inputs_shape)
        n = self._num_units
        h_depth = self._num_proj or n
        init = self._initializer
        # The deprecated shard counts still shard the kernels, as TF1 does.
        unit_shards = self._num_unit_shards
        proj_shards = self._num_proj_shards
        self._kernel = self._add_variable(
            "kernel",
            [input_depth + h_depth, 4 * n],
            initializer=init,
            partitioner=unit_shards and partitioned_variables.fixed_size_partitioner(unit_shards),
        )
        self._bias = self._add_variable("bias", [4 * n], initializer=init_ops.zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag = self._add_variable("w_f_diag", [n], initializer=init)
            self._w_i_diag = self._add_variable("w_i_diag", [n], initializer=init)
            self._w_o_diag = self._add_variable("w_o_diag", [n], initializer=init)
        if self._num_proj is not None:
            with vs.variable_scope("projection"):
                self._proj_kernel = self._add_variable(
                    "kernel",
                    [n, self._num_proj],
                    initializer=init,
                    partitioner=proj_shards
                    and partitioned_variables.fixed_size_partitioner(proj_shards),
                )

    def call(self, inputs, state):
        from asyncflow import clip_ops

        sigmoid = math_ops.sigmoid
        n = self._num_units
        if self._state_is_tuple:
            c_prev, m_prev = _state_pair(state)
        else:
            c_prev = array_ops.slice(state, [0, 0], [-1, n])
            m_prev = array_ops.slice(state, [0, n], [-1, self._num_proj or n])
        lstm = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, m_prev], 1), self._kernel), self._bias
        )
        i, j, f, o = array_ops.split(lstm, 4, axis=1)
        fb = array_ops.constant(self._forget_bias, dtype=f.dtype)
        if self._use_peepholes:
            c = sigmoid(f + fb + self._w_f_diag * c_prev) * c_prev + sigmoid(
                i + self._w_i_diag * c_prev
            ) * self._activation(j)
        else:
            c = sigmoid(f + fb) * c_prev + sigmoid(i) * self._activation(j)
        if self._cell_clip is not None:
            c = clip_ops.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * self._activation(c)
        else:
            m = sigmoid(o) * self._activation(c)
        if self._num_proj is not None:
            m = math_ops.matmul(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = clip_ops.clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, m) if self._state_is_tuple else array_ops.concat([c, m], 1)
        return m, new_state


class GRUCell(RNNCell):
    """TF1's GRUCell (gates/kernel, gates/bias = 1, candidate/kernel, candidate/bias)."""

    def __init__(
        self,
        num_units,
        activation=None,
        reuse=None,
        kernel_initializer=None,
        bias_initializer=None,
        name=None,
        dtype=None,
    ):
        super().__init__(name=name, dtype=dtype, _reuse=reuse)
        self._num_units = num_units
        self._activation = _activation(activation)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        input_depth = _input_depth(self, inputs_shape)
        n = self._num_units
        ki, bi = self._kernel_initializer, self._bias_initializer
        with vs.variable_scope("gates"):
            self._gate_kernel = self._add_variable(
                "kernel", [input_depth + n, 2 * n], initializer=ki
            )
            self._gate_bias = self._add_variable(
                "bias", [2 * n], initializer=bi or init_ops.constant_initializer(1.0)
            )
        with vs.variable_scope("candidate"):
            self._candidate_kernel = self._add_variable(
                "kernel", [input_depth + n, n], initializer=ki
            )
            self._candidate_bias = self._add_variable(
                "bias", [n], initializer=bi or init_ops.zeros_initializer()
            )

    def call(self, inputs, state):
        gate = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, state], 1), self._gate_kernel),
            self._gate_bias,
        )
        r, u = array_ops.split(math_ops.sigmoid(gate), 2, axis=1)
        cand = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, r * state], 1), self._candidate_kernel),
            self._candidate_bias,
        )
        c = self._activation(cand)
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class MultiRNNCell(RNNCell):
    """Cells stacked: cell i runs under scope "cell_i" on the output of cell i-1."""

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not nest.is_nested(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(nest.is_nested(c.state_size) for c in self._cells):
            raise ValueError(
                "Some cells return tuples of states, but the flag state_is_tuple is not set. "
                f"State sizes are: {[c.state_size for c in self._cells]}"
            )

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    output_size = property(lambda self: self._cells[-1].output_size)

    @property
    def variables(self) -> list:
        return [v for c in self._cells for v in c.variables]

    def zero_state(self, batch_size, dtype):
        with ops.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return super().zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        with self._entered(scope):
            self._built = True
            return self.call(inputs, state)

    def call(self, inputs, state):
        if self._state_is_tuple and not nest.is_nested(state):
            raise ValueError(
                f"Expected state to be a tuple of length {len(self.state_size)}, "
                f"but received: {state}"
            )
        cur_pos, cur = 0, inputs
        new_states = []
        for i, cell in enumerate(self._cells):
            with vs.variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    cur_state = state[i]
                else:
                    size = cell.state_size
                    cur_state = array_ops.slice(state, [0, cur_pos], [-1, size])
                    cur_pos += size
                cur, new = cell(cur, cur_state)
                new_states.append(new)
        if self._state_is_tuple:
            return cur, tuple(new_states)
        return cur, array_ops.concat(new_states, 1)


def _dropout_seed(seed, salt_prefix: str, index: int):
    """The op seed of one dropout in a DropoutWrapper: TF's derivation from the wrapper's
    seed, the part ("input", "state", "output") and the leaf's index, so seeded masks
    are TF's."""
    if seed is None:
        return None
    digest = hashlib.md5(f"{seed}{salt_prefix}_{index}".encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


def _default_dropout_state_filter_visitor(substate):
    """Drop out an LSTM's h but never its memory c; TensorArrays are left alone."""
    from asyncflow.ops.tensor_array_ops import TensorArray

    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return not isinstance(substate, TensorArray)


def _enumerated_filtered_map(fn, values, filter_fn=None):
    """`fn(i, part)` on the parts of `values` that `filter_fn` selects (the others are
    kept), `i` counting every part in order, selected or not (TF's enumeration of a
    traverse-shallow structure)."""
    counter = iter(range(1 << 62))

    def leaf(value, selected):
        i = next(counter)
        return fn(i, value) if selected else value

    def walk(value):
        decision = filter_fn(value) if filter_fn is not None else True
        if isinstance(decision, bool):
            if decision and nest.is_nested(value):
                return nest._rebuild(value, [walk(v) for v in nest._items(value)])
            return leaf(value, decision)
        parts = []
        for v, d in zip(nest._items(value), nest._items(decision)):
            parts.append(walk(v) if d and nest.is_nested(v) else leaf(v, d))
        return nest._rebuild(value, parts)

    return walk(values)


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and state (keep probabilities; 1 = none).

    Each dropped part gets an op seed derived from `seed` as TF derives it.  The state
    filter (default: an LSTM's h only) picks the state parts dropped.  With
    `variational_recurrent`, one noise draw per part (shape [1, size], made here) is
    reused at every step.

    Raises:
      ValueError: a constant keep probability outside [0, 1]; `variational_recurrent`
        without `dtype`, or without `input_size` while inputs are dropped.
      TypeError: a `dropout_state_filter_visitor` that is not callable.
    """

    def __init__(
        self,
        cell,
        input_keep_prob=1.0,
        output_keep_prob=1.0,
        state_keep_prob=1.0,
        variational_recurrent=False,
        input_size=None,
        dtype=None,
        seed=None,
        dropout_state_filter_visitor=None,
    ):
        super().__init__()
        if dropout_state_filter_visitor is not None and not callable(dropout_state_filter_visitor):
            raise TypeError("dropout_state_filter_visitor must be callable")
        self._state_filter = dropout_state_filter_visitor or _default_dropout_state_filter_visitor
        self._cell = cell
        with ops.name_scope("DropoutWrapperInit"):
            for attr, p in (
                ("input_keep_prob", input_keep_prob),
                ("state_keep_prob", state_keep_prob),
                ("output_keep_prob", output_keep_prob),
            ):
                tensor = ops.convert_to_tensor(p)
                const = ops.constant_value(tensor)
                if const is not None:
                    if const < 0 or const > 1:
                        # TF1 formats the bad value with %d (1.5 -> "1").
                        raise ValueError(f"Parameter {attr} must be between 0 and 1: {int(const)}")
                    setattr(self, f"_{attr}", float(const))
                else:
                    setattr(self, f"_{attr}", tensor)
        self._variational_recurrent = variational_recurrent
        self._seed = seed
        self._input_noise = self._state_noise = self._output_noise = None
        if variational_recurrent:
            if dtype is None:
                raise ValueError("When variational_recurrent=True, dtype must be provided")

            def noise(sizes, salt):
                def one(i, size):
                    dims = [size] if isinstance(size, int) else list(size)
                    return random_ops.random_uniform(
                        [1, *dims], seed=_dropout_seed(seed, salt, i), dtype=dtype
                    )

                return nest.flatten(_enumerated_filtered_map(one, sizes))

            if not isinstance(self._input_keep_prob, float) or self._input_keep_prob < 1.0:
                if input_size is None:
                    raise ValueError(
                        "When variational_recurrent=True and input_keep_prob < 1.0 or "
                        "is unknown, input_size must be provided"
                    )
                self._input_noise = noise(input_size, "input")
            self._state_noise = noise(cell.state_size, "state")
            self._output_noise = noise(cell.output_size, "output")

    cell = property(lambda self: self._cell)
    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)
    variables = property(lambda self: self._cell.variables)

    def zero_state(self, batch_size, dtype):
        with ops.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            return self._cell.zero_state(batch_size, dtype)

    wrapped_cell = property(lambda self: self._cell)

    def _dropout(self, values, salt, noise, keep_prob, filter_fn=None):
        if not self._variational_recurrent:

            def one(i, v):
                seed = _dropout_seed(self._seed, salt, i)
                return nn_impl.dropout(v, rate=1.0 - keep_prob, seed=seed)
        else:

            def one(i, v):
                # keep_prob + U[0, 1) floors to 1 with probability keep_prob.
                out = math_ops.truediv(v, keep_prob) * math_ops.floor(keep_prob + noise[i])
                out.set_shape(v.shape)
                return out

        return _enumerated_filtered_map(one, values, filter_fn)

    def __call__(self, inputs, state, scope=None):
        def wanted(p):
            return not isinstance(p, float) or p < 1

        if wanted(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._input_noise, self._input_keep_prob)
        output, new_state = self._cell(inputs, state, scope=scope)
        if wanted(self._state_keep_prob):
            new_state = self._dropout(
                new_state, "state", self._state_noise, self._state_keep_prob, self._state_filter
            )
        if wanted(self._output_keep_prob):
            output = self._dropout(output, "output", self._output_noise, self._output_keep_prob)
        return output, new_state


class DeviceWrapper(RNNCell):
    """Runs a cell on a device (`tf.nn.rnn_cell.DeviceWrapper`): its ops under
    `tf.device(device)`."""

    def __init__(self, cell, device):
        super().__init__()
        self._cell = cell
        self._device = device

    cell = property(lambda self: self._cell)
    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)
    variables = property(lambda self: self._cell.variables)

    def zero_state(self, batch_size, dtype):
        with (
            ops.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]),
            ops.device(self._device),
        ):
            return self._cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        with ops.device(self._device):
            return self._cell(inputs, state, scope=scope)


class ResidualWrapper(RNNCell):
    """A cell whose output adds its input (`tf.nn.rnn_cell.ResidualWrapper`):
    `residual_fn(inputs, outputs)`, by default inputs + outputs for each part.

    Raises (when called):
      ValueError / TypeError: inputs and outputs of different structures (nest's).
    """

    def __init__(self, cell, residual_fn=None):
        super().__init__()
        self._cell = cell
        self._residual_fn = residual_fn

    cell = property(lambda self: self._cell)
    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)
    variables = property(lambda self: self._cell.variables)

    def zero_state(self, batch_size, dtype):
        with ops.name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        outputs, new_state = self._cell(inputs, state, scope=scope)

        def default_residual_fn(inputs, outputs):
            nest.assert_same_structure(inputs, outputs)
            nest.map_structure(
                lambda i, o: i.shape.assert_is_compatible_with(o.shape), inputs, outputs
            )
            return nest.map_structure(lambda i, o: i + o, inputs, outputs)

        res = (self._residual_fn or default_residual_fn)(inputs, outputs)
        return res, new_state
