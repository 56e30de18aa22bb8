"""Gradient checking (`tf.compat.v1.test.compute_gradient` and friends).

The theoretical Jacobian comes from the gradient graph (`gradients(y, x, dy)` run once
per element of y with a one-hot dy); the numerical one from central differences
(one pair of runs per element of x).  Both are (x_size, y_size) matrices, row i being
d y / d x[i], as TF lays them out; a complex x or y counts as twice as many reals
(real and imaginary parts in turn), so a complex Jacobian is real.  Run in float64:
float32 differences carry ~1e-3 error.

Deterministic unlike TF: without `x_init_value`, x starts at values drawn from a fixed
seed.
"""

from __future__ import annotations

import contextlib

import numpy as np

from asyncflow import graph as ops
from asyncflow.gradients import gradients
from asyncflow.indexed_slices import IndexedSlices

__all__ = ["compute_gradient", "compute_gradient_error", "GradientChecker"]


@contextlib.contextmanager
def _session_for(graph):
    from asyncflow.session import Session, get_default_session

    sess = get_default_session()
    if sess is not None and sess.graph is graph:
        yield sess
        return
    with Session(graph=graph) as sess:
        yield sess


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _dense_value(sess, dx, feed, x_shape):
    """Run dx (a Tensor or IndexedSlices) and return a dense array of x's shape."""
    if isinstance(dx, IndexedSlices):
        values, indices = sess.run([dx.values, dx.indices], feed)
        out = np.zeros(x_shape, dtype=values.dtype)
        np.add.at(out, indices, values)
        return out
    return np.asarray(sess.run(dx, feed))


def _reals(a) -> np.ndarray:
    """`a` flat, a complex number counting as two reals (real, imaginary): TF's layout of
    complex Jacobians.  A view, so writing into it writes into `a`."""
    a = a.reshape(-1)
    return a.view(a.real.dtype) if np.iscomplexobj(a) else a


def _real_size(shape, dtype) -> int:
    return _size(shape) * (2 if dtype.is_complex else 1)


def _theoretical_jacobian(sess, x, x_shape, x_data, dx, dy, y_shape, feed):
    x_size, y_size = _real_size(x_shape, x.dtype), _real_size(y_shape, dy.dtype)
    jacobian = np.zeros((x_size, y_size), dtype=x_data.real.dtype)
    if dx is None:
        return jacobian
    dy_data = np.zeros(dy.shape.as_list(), dtype=dy.dtype.as_numpy_dtype)
    flat = _reals(dy_data)
    for col in range(y_size):
        flat[:] = 0
        flat[col] = 1
        value = _dense_value(sess, dx, {**feed, x: x_data, dy: dy_data}, x_shape)
        jacobian[:, col] = _reals(np.ascontiguousarray(value, dtype=x_data.dtype))
    return jacobian


def _numeric_jacobian(sess, x, x_shape, x_data, y, y_shape, delta, feed):
    x_size, y_size = _real_size(x_shape, x.dtype), _real_size(y_shape, y.dtype)
    jacobian = np.zeros((x_size, y_size), dtype=x_data.real.dtype)
    x_pos = x_data.copy()
    flat = _reals(x_pos)
    for row in range(x_size):
        orig = flat[row]
        flat[row] = orig + delta
        # Copies: a fetch may be the fed buffer itself (y = identity(x)).
        y_pos = np.array(sess.run(y, {**feed, x: x_pos.copy()}))
        flat[row] = orig - delta
        y_neg = np.array(sess.run(y, {**feed, x: x_pos.copy()}))
        flat[row] = orig
        diff = _reals(y_pos).astype(np.float64) - _reals(y_neg).astype(np.float64)
        jacobian[row, :] = diff / (2 * delta)
    return jacobian


def _check_shape(t, shape, what):
    # TF's checker takes a shape of the same size too (y_shape [1] for a scalar y).
    n = t.shape.num_elements()
    if not t.shape.is_compatible_with(shape) and n != int(np.prod(shape)):
        raise ValueError(
            f"{what} shape {list(shape)} is not compatible with {t}'s shape {t.shape}"
        )


def _one(sess, x, x_shape, y, y_shape, x_init_value, delta, feed, rng):
    x_shape = tuple(int(d) for d in x_shape)
    y_shape = tuple(int(d) for d in y_shape)
    _check_shape(x, x_shape, "x")
    _check_shape(y, y_shape, "y")
    np_dtype = x.dtype.as_numpy_dtype
    if x_init_value is not None:
        x_data = np.array(x_init_value, dtype=np_dtype)
        if x_data.shape != x_shape:
            raise ValueError(f"x_init_value shape {x_data.shape} does not match x_shape {x_shape}")
    elif x.dtype.is_complex:
        x_data = np.asarray(rng.random_sample(x_shape) + 1j * rng.random_sample(x_shape), np_dtype)
    else:  # an array even for a scalar x: the numeric Jacobian perturbs it in place
        x_data = np.asarray(rng.random_sample(x_shape), np_dtype)
    with x.graph.as_default():
        dy_orig = ops.apply_op(
            "Const",
            [],
            {
                # y's own shape where known: y_shape may differ but have y's size.
                "value": np.ones(
                    y.shape.as_list() if y.shape.is_fully_defined() else y_shape,
                    dtype=y.dtype.as_numpy_dtype,
                ),
                "dtype": y.dtype,
            },
            name="compute_gradient_dy",
        ).outputs[0]
        (dx,) = gradients(y, x, dy_orig)
    theoretical = _theoretical_jacobian(sess, x, x_shape, x_data, dx, dy_orig, y_shape, feed)
    numerical = _numeric_jacobian(sess, x, x_shape, x_data, y, y_shape, delta, feed)
    return theoretical, numerical


def compute_gradient(
    x,
    x_shape,
    y,
    y_shape,
    x_init_value=None,
    delta=1e-3,
    init_targets=None,
    extra_feed_dict=None,
):
    """Theoretical and numerical Jacobians of y with respect to x (`tf.test.compute_gradient`).

    `x` is a Tensor (fed with `x_init_value`, or seeded uniform [0, 1) values) or a list
    of them with a list of shapes.  Uses the default session when it runs x's graph,
    else a temporary one.  Returns `(theoretical, numerical)`, each (x_size, y_size), or
    a list of such pairs for a list of xs.

    Raises:
      ValueError: a shape that does not match its tensor.
      LookupError: an op between x and y without a gradient.
    """
    feed = dict(extra_feed_dict or {})
    rng = np.random.RandomState(0)
    with _session_for(y.graph) as sess:
        for init in init_targets or ():
            sess.run(init)
        if isinstance(x, (list, tuple)):
            inits = list(x_init_value) if x_init_value is not None else [None] * len(x)
            # Every x is fed: the given value, or seeded random values of its shape.
            inits = [
                rng.random_sample(tuple(int(d) for d in s)) if v is None else v
                for v, s in zip(inits, x_shape)
            ]
            return [
                _one(sess, xi, si, y, y_shape, vi, delta, _others(x, xi, inits, feed), rng)
                for xi, si, vi in zip(x, x_shape, inits)
            ]
        return _one(sess, x, x_shape, y, y_shape, x_init_value, delta, feed, rng)


def _others(xs, current, inits, feed):
    """Feeds for the xs not being checked (their init values, when given)."""
    out = dict(feed)
    for xi, vi in zip(xs, inits):
        if xi is not current and vi is not None:
            out[xi] = np.asarray(vi, dtype=xi.dtype.as_numpy_dtype)
    return out


def compute_gradient_error(
    x,
    x_shape,
    y,
    y_shape,
    x_init_value=None,
    delta=1e-3,
    init_targets=None,
    extra_feed_dict=None,
) -> float:
    """The largest absolute difference between theoretical and numerical Jacobians."""
    grad = compute_gradient(
        x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict
    )
    pairs = grad if isinstance(grad, list) else [grad]
    error = 0.0
    for theoretical, numerical in pairs:
        if theoretical.size:
            error = max(error, float(np.fabs(theoretical - numerical).max()))
    return error


class GradientChecker:
    """Test helper: build y from placeholders, then compare Jacobians in one call.

        checker = GradientChecker(delta=1e-6)
        checker.assert_close(lambda a, b: a * b, [a_value, b_value], atol=1e-6)

    `fn` receives one placeholder per input value (float64 unless the value is an
    integer array, which is fed but not checked) and returns y.  With
    `static_shapes=False` the placeholders have unknown dimensions, so the gradient
    graph takes its run-time shape paths.
    """

    def __init__(self, delta: float = 1e-6, dtype=np.float64, static_shapes: bool = True):
        self.delta = delta
        self.dtype = np.dtype(dtype)
        self.static_shapes = static_shapes

    def _as_value(self, v):
        v = np.asarray(v)
        return v if v.dtype.kind in "iub" else v.astype(self.dtype)

    def errors(self, fn, values) -> list[float]:
        """The max abs Jacobian error for each floating input of `fn` (None for others)."""
        from asyncflow.ops import array_ops
        from asyncflow.session import Session

        graph = ops.Graph()
        values = [self._as_value(v) for v in values]
        with graph.as_default(), Session(graph=graph) as sess, sess.as_default():
            xs = [
                array_ops.placeholder(
                    v.dtype, v.shape if self.static_shapes else [None] * v.ndim, name=f"x{i}"
                )
                for i, v in enumerate(values)
            ]
            y = ops.convert_to_tensor(fn(*xs))
            feed_all = dict(zip(xs, values))
            y_shape = np.shape(sess.run(y, feed_all))
            out = []
            for x, v in zip(xs, values):
                if v.dtype.kind in "iub":
                    out.append(None)
                    continue
                others = {xj: vj for xj, vj in feed_all.items() if xj is not x}
                theoretical, numerical = compute_gradient(
                    x, v.shape, y, y_shape, v, self.delta, extra_feed_dict=others
                )
                err = float(np.fabs(theoretical - numerical).max()) if theoretical.size else 0.0
                out.append(err)
        return out

    def assert_close(self, fn, values, atol: float = 1e-6) -> None:
        """AssertionError naming the input whose Jacobian differs by more than `atol`."""
        for i, err in enumerate(self.errors(fn, values)):
            if err is not None and not err <= atol:
                raise AssertionError(f"gradient of input {i}: max Jacobian error {err} > {atol}")
