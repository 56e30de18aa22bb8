"""`tf.keras.backend` in TF1 graph mode: Keras' session, learning phase, naming and
small variable helpers.

Keras keeps one session per process (`get_session`): a default session the user
entered wins, otherwise Keras makes its own.  Every `get_session()` call initializes
the graph's variables that Keras has not seen initialized yet, which is how a Keras
program runs without `global_variables_initializer()`.

Layer names are uniquified per graph ("dense", "dense_1", ...), independently of name
scopes; `clear_session()` resets the default graph, the session and those counters.
The learning phase is a per-graph `placeholder_with_default(False)` named
"keras_learning_phase", unless `set_learning_phase` fixed it to 0 or 1.
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np

from asyncflow import dtypes, layer_classes
from asyncflow import graph as ops
from asyncflow import resource_variable as _rv
from asyncflow import session as _session
from asyncflow.keras import backend_config, backend_math, backend_more
from asyncflow.keras.backend_config import floatx
from asyncflow.ops import array_ops, init_ops, state_ops
from asyncflow.train import moving_averages

__all__ = [
    "get_session",
    "set_session",
    "clear_session",
    "get_graph",
    "learning_phase",
    "set_learning_phase",
    "learning_phase_scope",
    "in_train_phase",
    "in_test_phase",
    "variable",
    "constant",
    "placeholder",
    "eval",
    "get_value",
    "set_value",
    "batch_get_value",
    "batch_set_value",
    "name_scope",
    "get_uid",
    "reset_uids",
    "function",
    "track_variable",
    "manual_variable_initialization",
    "random_normal_variable",
    "random_uniform_variable",
    "moving_average_update",
]

# The settings and tensor functions are part of this module's API (tf.keras.backend).
for _module in (backend_config, backend_math, backend_more):
    for _name in _module.__all__:
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
del _name, _module

_SESSION: list = [None]
# manual_variable_initialization(True): get_session() leaves variables to the user.
_MANUAL_VAR_INIT: list = [False]
# graph -> the learning phase tensor (or a fixed 0/1 set by set_learning_phase)
_LEARNING_PHASE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FIXED_PHASE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# graph -> {prefix: count} for layer and model names
_UIDS: weakref.WeakKeyDictionary = layer_classes.OBJECT_NAME_UIDS  # tf.layers count in it
# graph -> variables outside every collection that Keras still initializes (metrics')
_TRACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# graph -> ids of the variables Keras has already initialized (or seen initialized)
_INITIALIZED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_graph() -> ops.Graph:
    return ops.get_default_graph()


def get_uid(prefix: str = "") -> int:
    """1, 2, 3, ... for each call with `prefix` in the default graph."""
    uids = _UIDS.setdefault(get_graph(), {})
    uids[prefix] = uids.get(prefix, 0) + 1
    return uids[prefix]


def reset_uids() -> None:
    _UIDS.pop(get_graph(), None)


def unique_object_name(name: str, zero_based: bool = True) -> str:
    """`name`, `name_1`, ... per graph (zero_based) or `name_1`, `name_2`, ..."""
    uid = get_uid(name)
    if zero_based:
        uid -= 1
        return name if uid == 0 else f"{name}_{uid}"
    return f"{name}_{uid}"


# -- session ----------------------------------------------------------------------------------


def get_session(op_input_list=()) -> _session.BaseSession:
    """Keras' session: the default session if one is entered, else Keras' own (made on
    first use); the graph's not yet initialized variables are initialized in it."""
    sess = ops.get_default_session()
    if sess is None:
        if _SESSION[0] is None or _SESSION[0].graph is not get_graph() or _SESSION[0]._closed:
            _SESSION[0] = _session.Session(graph=get_graph())
        sess = _SESSION[0]
    if not _MANUAL_VAR_INIT[0]:
        _initialize_variables(sess)
    return sess


def set_session(session) -> None:
    _SESSION[0] = session


def clear_session() -> None:
    """Forget Keras' session, reset the default graph and the layer-name counters."""
    if _SESSION[0] is not None:
        with contextlib.suppress(Exception):
            _SESSION[0].close()
    _SESSION[0] = None
    ops.reset_default_graph()


def track_variable(v) -> None:
    """Have `get_session` initialize `v` although it is in no collection."""
    _TRACKED.setdefault(v.graph, []).append(v)


def _graph_variables(graph) -> list:
    seen, out = set(), []
    for key in (ops.GraphKeys.GLOBAL_VARIABLES, ops.GraphKeys.LOCAL_VARIABLES):
        for v in graph.get_collection(key):
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    for v in _TRACKED.get(graph, []):
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _initialize_variables(sess) -> None:
    graph = sess.graph
    done = _INITIALIZED.setdefault(graph, set())
    candidates = [v for v in _graph_variables(graph) if id(v) not in done]
    if not candidates:
        return
    with graph.as_default():
        flags = sess.run([state_ops.is_variable_initialized(v) for v in candidates])
        todo = [v for v, ok in zip(candidates, flags, strict=True) if not ok]
        if todo:
            sess.run([v.initializer for v in todo])
    done.update(id(v) for v in candidates)


# -- learning phase ---------------------------------------------------------------------------


def learning_phase():
    """The learning phase: 0/1 if fixed by `set_learning_phase`, else the graph's boolean
    placeholder "keras_learning_phase" (False unless fed)."""
    graph = get_graph()
    if graph in _FIXED_PHASE:
        return _FIXED_PHASE[graph]
    if graph not in _LEARNING_PHASE:
        with ops.name_scope(""):
            _LEARNING_PHASE[graph] = array_ops.placeholder_with_default(
                False, shape=(), name="keras_learning_phase"
            )
    return _LEARNING_PHASE[graph]


def symbolic_learning_phase():
    graph = get_graph()
    learning_phase_tensor = learning_phase()
    if graph in _FIXED_PHASE:
        return _FIXED_PHASE[graph]
    return learning_phase_tensor


def set_learning_phase(value: int) -> None:
    if value not in (0, 1):
        raise ValueError("Expected learning phase to be 0 or 1.")
    _FIXED_PHASE[get_graph()] = value


@contextlib.contextmanager
def learning_phase_scope(value: int):
    if value not in (0, 1):
        raise ValueError("Expected learning phase to be 0 or 1.")
    graph = get_graph()
    had, old = graph in _FIXED_PHASE, _FIXED_PHASE.get(graph)
    _FIXED_PHASE[graph] = value
    try:
        yield
    finally:
        if had:
            _FIXED_PHASE[graph] = old
        else:
            _FIXED_PHASE.pop(graph, None)


# -- tensors and variables --------------------------------------------------------------------


def name_scope(name, default_name=None, values=None):
    """TF1's `tf.name_scope` (Keras' backend exports it)."""
    return ops.name_scope(name, default_name, values)


def variable(value, dtype=None, name=None, constraint=None):
    """A resource variable holding `value` (Keras' dtype default: floatx())."""
    dtype = dtypes.as_dtype(dtype or floatx())
    v = _rv.ResourceVariable(
        np.asarray(value, dtype=dtype.as_numpy_dtype),
        dtype=dtype,
        name=name,
        constraint=constraint,
    )
    v._keras_shape = tuple(np.shape(value))
    return v


def manual_variable_initialization(value) -> None:
    """With True, `get_session()` no longer initializes the graph's variables."""
    _MANUAL_VAR_INIT[0] = bool(value)


def _initialized_variable(initializer, shape, dtype, name, seed):
    dtype = dtypes.as_dtype(dtype or floatx())
    # Keras draws a seed from NumPy when none is given.
    seed = np.random.randint(10e8) if seed is None else seed
    v = _rv.ResourceVariable(initializer(dtype, seed)(shape), dtype=dtype, name=name)
    v._keras_shape = tuple(shape)
    return v


def random_normal_variable(shape, mean, scale, dtype=None, name=None, seed=None):
    """A variable of normal draws (mean, scale), as TF1's random_normal_initializer."""
    return _initialized_variable(
        lambda d, s: init_ops.random_normal_initializer(mean, scale, seed=s, dtype=d),
        shape, dtype, name, seed,
    )  # fmt: skip


def random_uniform_variable(shape, low, high, dtype=None, name=None, seed=None):
    """A variable of uniform draws in [low, high), as TF1's random_uniform_initializer."""
    return _initialized_variable(
        lambda d, s: init_ops.random_uniform_initializer(low, high, seed=s, dtype=d),
        shape, dtype, name, seed,
    )  # fmt: skip


def moving_average_update(x, value, momentum):
    """x = x * momentum + value * (1 - momentum), zero-debiased as TF1's
    assign_moving_average."""
    return moving_averages.assign_moving_average(x, value, momentum, zero_debias=True)


def constant(value, dtype=None, shape=None, name=None):
    return array_ops.constant(value, dtype=dtype or floatx(), shape=shape, name=name)


def placeholder(shape=None, ndim=None, dtype=None, sparse=False, name=None, ragged=False):
    dtype = dtype or floatx()
    if shape is None and ndim:
        shape = (None,) * ndim
    return array_ops.placeholder(dtype, shape=shape, name=name)


def in_train_phase(x, alt, training=None):
    """`x` in training, `alt` otherwise (either may be a callable); `training` defaults
    to the learning phase."""
    training = learning_phase() if training is None else training
    if isinstance(training, (bool, int)):
        chosen = x if training else alt
        return chosen() if callable(chosen) else chosen
    return backend_math.switch(training, x, alt)


def in_test_phase(x, alt, training=None):
    return in_train_phase(alt, x, training=training)


def eval(x):  # noqa: A001 - Keras' name
    return get_value(x)


def get_value(x):
    return get_session().run(x)


def batch_get_value(tensors) -> list:
    return get_session().run(list(tensors)) if tensors else []


def set_value(x, value) -> None:
    batch_set_value([(x, value)])


def set_checked_weights(params, weights, owner: str, kind: str) -> None:
    """Assign `weights` (numpy arrays) to `params` in order, as a layer's or optimizer's
    `set_weights` does; `owner` and `kind` word TF's messages ('layer "dense"', "layer";
    "optimizer Adam", "optimizer").

    Raises:
      ValueError: a different number of arrays, or an array of another shape.
    """
    if len(params) != len(weights):
        raise ValueError(
            f"You called `set_weights(weights)` on {owner} with a weight list of length "
            f"{len(weights)}, but the {kind} was expecting {len(params)} weights. Provided "
            f"weights: {str(weights)[:50]}..."
        )
    pairs = []
    for p, w in zip(params, weights, strict=True):
        w = np.asarray(w)
        if tuple(p.shape.as_list()) != w.shape:
            raise ValueError(
                f"{kind.capitalize()} weight shape {tuple(p.shape.as_list())} not compatible "
                f"with provided weight shape {w.shape}"
            )
        pairs.append((p, w))
    batch_set_value(pairs)


def batch_set_value(tuples) -> None:
    """Assign each (variable, numpy value) through one cached placeholder per variable."""
    if not tuples:
        return
    sess = get_session()
    ops_, feed = [], {}
    for x, value in tuples:
        value = np.asarray(value, dtype=x.dtype.base_dtype.as_numpy_dtype)
        cache = getattr(x, "_keras_assign", None)
        if cache is None:
            with x.graph.as_default() if hasattr(x, "graph") else contextlib.nullcontext():
                ph = array_ops.placeholder(x.dtype.base_dtype, shape=value.shape)
                cache = (ph, x.assign(ph))
            x._keras_assign = cache
        feed[cache[0]] = value
        ops_.append(cache[1])
    sess.run(ops_, feed_dict=feed)


class Function:
    """A callable running `outputs` (and `updates`) in Keras' session, fed `inputs`.

    `fetches` are run alongside (TF's hook for callbacks, e.g. TensorBoard's histograms);
    `fetch_callbacks[t]`, when set, receives the value of fetch `t` after each call.
    """

    def __init__(
        self,
        inputs,
        outputs,
        updates=None,
        name=None,
        fetches=None,
        options=None,
        run_metadata=None,
    ):
        from asyncflow.ops import control_flow_ordering

        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.fetches = list(fetches or [])
        self.fetch_callbacks = {}
        # Passed to Session.run, as Keras' session kwargs (TensorBoard traces a batch).
        self.run_options = options
        self.run_metadata = run_metadata
        updates = [u for u in (updates or []) if u is not None]
        with ops.control_dependencies(self.outputs):
            self._update_op = control_flow_ordering.group(*updates) if updates else None

    def __call__(self, inputs):
        feed = {}
        for ph, value in zip(self.inputs, inputs, strict=True):
            if not isinstance(ph, int):
                feed[ph] = value
        extra = list(self.fetches)
        fetches = list(self.outputs) + extra
        if self._update_op is not None:
            fetches.append(self._update_op)
        out = get_session().run(
            fetches, feed_dict=feed, options=self.run_options, run_metadata=self.run_metadata
        )
        n = len(self.outputs)
        for tensor, value in zip(extra, out[n : n + len(extra)], strict=True):
            if tensor in self.fetch_callbacks:
                self.fetch_callbacks[tensor](value)
        return out[:n]


def function(inputs, outputs, updates=None, name=None, **kwargs) -> Function:
    return Function(
        inputs,
        outputs,
        updates=updates,
        name=name,
        fetches=kwargs.get("fetches"),
        options=kwargs.get("options"),
        run_metadata=kwargs.get("run_metadata"),
    )
