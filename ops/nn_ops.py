"""Neural-network ops: activations, Softmax/LogSoftmax and BiasAdd (the `af.nn` namespace).

Sigmoid and Tanh are registered in math_ops and re-exported here, as TF exposes them
under both `tf.` and `tf.nn.`.  `__all__` lists exactly the names that belong under
`af.nn`.

Invariant: Softmax and LogSoftmax always work on the last axis; the builders move
another axis there and back with Transpose (array_ops), as TF1 does.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.devices import cpu_budget
from asyncflow.kernel_api import NOT_INLINE, template
from asyncflow.ops import cnn_jit, conv_ops, eigen_reduce, onednn
from asyncflow.ops import elementwise as _ew
from asyncflow.ops.conv_ops import _each_part, _parts
from asyncflow.ops.math_ops import _as_dtype, _builder_scope, _quiet, _shape_str, sigmoid, tanh
from asyncflow.ops.pooling_ops import (  # convert_padding: TF's nn_ops helper
    _max_pool_run,
    convert_padding,  # noqa: F401
    first_max_code,
    max_pool_grad_relu,
    spread_relu_by_code,
)
from asyncflow.registry import (
    FLOATING,
    NUMERIC,
    REAL,
    REQUIRED,
    NotDifferentiable,
    TypeConstraint,
    get_op_def,
    register_op,
)

__all__ = [
    "relu",
    "relu6",
    "elu",
    "softplus",
    "softsign",
    "selu",
    "leaky_relu",
    "local_response_normalization",
    "lrn",
    "softmax",
    "log_softmax",
    "bias_add",
    "sigmoid",
    "tanh",
]


def _unary_shape(op):
    return [op.inputs[0].shape]


def _activation(op_type: str, fn, types: TypeConstraint, doc: str, inplace=None, out_fn=None):
    """Register an element-wise activation `activations = fn(xp, features)` and its builder.

    `inplace(xp, x)` computes the activation into `x`, used when nothing else holds the
    input (`ctx.may_forward`); `out_fn(xp, x, out)` (ops.elementwise) does both, over
    blocks shared by the CPU budget's threads for large inputs."""
    op_def = register_op(
        op_type,
        inputs=["features: T"],
        outputs=["activations: T"],
        attrs={"T": types},
        shape_fn=_unary_shape,
    )

    @op_def.kernel()
    async def _kernel(ctx, features):
        xp = ctx.xp
        if out_fn is not None and features.dtype == ctx.attrs["T"].np_dtype:
            out = features if ctx.may_forward(0, features) else None
            return await ctx.compute(_quiet, xp, _ew.parallel, xp, out_fn, (features,), out)
        if (
            inplace is not None
            and ctx.may_forward(0, features)
            and features.dtype == ctx.attrs["T"].np_dtype
        ):
            return await ctx.compute(_quiet, xp, inplace, xp, features)
        out = await ctx.compute(_quiet, xp, fn, xp, xp.asarray(features))
        return _as_dtype(xp, out, ctx.attrs["T"])

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"

    def builder(features, name=None):
        return ops.apply_op(op_type, [features], name=name).outputs[0]

    builder.__doc__ = doc
    builder.__name__ = builder.__qualname__ = op_type.lower()
    return op_def, _dispatch.add_dispatch_support(builder)


def _scalar(x, value):
    """`value` as a NumPy scalar of x's dtype (CuPy mixes with scalars, not NumPy arrays)."""
    return x.dtype.type(value)


def _zero(x):
    return _scalar(x, 0)


Relu, relu = _activation(
    "Relu",
    lambda xp, x: xp.maximum(x, _zero(x)),
    REAL,
    "Computes max(features, 0).",
    inplace=lambda xp, x: xp.maximum(x, _zero(x), out=x),
)
Relu6, relu6 = _activation(
    "Relu6",
    lambda xp, x: xp.minimum(xp.maximum(x, _zero(x)), _scalar(x, 6)),
    REAL,
    "Computes min(max(features, 0), 6).",
)


def _exp_minus_one(xp, x):
    """TF's exp(x) - 1 for x <= 0 (not expm1: -2e-8 gives 0.0, as TF's): float32 and
    float16 on TF's exp where the Exp kernel computes it (ops/elementwise.exp), else the
    exp rounded from float64 for narrower floats (NumPy's float32 exp is a ulp off near
    1 more often than TF's, and the subtraction magnifies it)."""
    neg = xp.minimum(x, _zero(x))
    if xp is np and x.dtype.itemsize < 8 and _ew.tf_exp():
        e = _ew.exp(np, neg)
    elif x.dtype.itemsize < 8:
        e = xp.exp(neg.astype(xp.float64)).astype(x.dtype)
    else:
        e = xp.exp(neg)
    return e - _scalar(x, 1)


Elu, elu = _activation(
    "Elu",
    # TF: (x < 0).select(exp(x) - 1, x)
    lambda xp, x: xp.where(x < 0, _exp_minus_one(xp, x), x),
    FLOATING,
    "Computes exp(features) - 1 where features < 0, else features.",
)
Softplus, softplus = _activation(
    "Softplus",
    lambda xp, x: _ew.softplus(xp, x),
    FLOATING,
    "Computes log(exp(features) + 1) without overflow.",
    out_fn=_ew.softplus,
)
Softsign, softsign = _activation(
    "Softsign",
    lambda xp, x: x / (xp.absolute(x) + _scalar(x, 1)),
    FLOATING,
    "Computes features / (abs(features) + 1).",
)

# TF's SeluFunctor constants (scale, and scale * alpha as its own literal).
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def _selu(xp, x):
    # TF: (x < 0).select(scale_alpha * (exp(x) - 1), scale * x): exp - 1, not expm1
    neg = _scalar(x, _SELU_SCALE_ALPHA) * _exp_minus_one(xp, x)
    return xp.where(x < 0, neg, _scalar(x, _SELU_SCALE) * x)


Selu, selu = _activation(
    "Selu",
    _selu,
    FLOATING,
    "Computes scale * features where features > 0, else scale * alpha * (exp(features) - 1).",
)

LeakyRelu = register_op(
    "LeakyRelu",
    inputs=["features: T"],
    outputs=["activations: T"],
    attrs={"alpha": 0.2, "T": FLOATING},
    shape_fn=_unary_shape,
)


def _leaky(xp, x, alpha):
    # TF: (x > 0).select(x, x * alpha) (alpha may be > 1 or < 0: no max)
    return xp.where(x > 0, x, x * _scalar(x, alpha))


@LeakyRelu.kernel()
async def _leaky_relu_kernel(ctx, features):
    xp = ctx.xp
    out = await ctx.compute(_quiet, xp, _leaky, xp, xp.asarray(features), ctx.attrs["alpha"])
    return _as_dtype(xp, out, ctx.attrs["T"])


@_dispatch.add_dispatch_support
def leaky_relu(features, alpha=0.2, name=None):
    """`tf.nn.leaky_relu`: features where features > 0, else alpha * features (op
    LeakyRelu; integer features are cast to float32 first)."""
    with _builder_scope(name, "LeakyRelu", [features]) as op_name:
        features = ops.convert_to_tensor(features, name="features")
        if features.dtype.is_integer:
            features = ops.apply_op("Cast", [features], {"DstT": dtypes.float32}).outputs[0]
    if isinstance(alpha, np.ndarray):
        alpha = alpha.item()
    return ops.apply_op("LeakyRelu", [features], {"alpha": float(alpha)}, name=op_name).outputs[0]


# -- LRN (local response normalization over the depth axis) ----------------------------------

_LRN_ATTRS = {"depth_radius": 5, "bias": 1.0, "alpha": 1.0, "beta": 0.5}
_LRN_TYPES = TypeConstraint(["float16", "bfloat16", "float32"], default="float32")


def _lrn_shape(op):
    shape = op.inputs[0].shape
    try:
        shape = shape.with_rank(4)
    except ValueError:
        raise ValueError(f"Shape must be rank 4 but is rank {shape.ndims}") from None
    return [shape] if len(op.inputs) == 1 else [shape.merge_with(op.inputs[1].shape)]


def _window_sum(xp, a, r, out=None):
    """sum of a[..., d - r : d + r + 1] for each depth d (zeros past the ends)."""
    depth = a.shape[-1]
    if out is None:
        out = a.copy()
    else:
        out[...] = a
    for o in range(1, min(r, depth - 1) + 1):
        out[..., o:] += a[..., :-o]
        out[..., :-o] += a[..., o:]
    return out


def _lrn_norm(xp, x, r, bias, alpha):
    n = _window_sum(xp, x * x, r)
    n *= _scalar(x, alpha)
    n += _scalar(x, bias)
    return n


def _pow_neg(xp, n, beta):
    """n ** -beta, into n: TF's LRN takes in / norm for beta 1, in * rsqrt(norm) for
    0.5, else in * exp(log(norm) * -beta)."""
    if beta == 1:
        return xp.reciprocal(n, out=n)
    if beta == 0.5:
        xp.sqrt(n, out=n)
        return xp.reciprocal(n, out=n)
    xp.log(n, out=n)
    n *= _scalar(n, -beta)
    return xp.exp(n, out=n)


def _lrn(xp, x, out, r, bias, alpha, beta):
    xp.multiply(x, _pow_neg(xp, _lrn_norm(xp, x, r, bias, alpha), beta), out=out)


def _lrn_grad(xp, g, x, y, out, r, bias, alpha, beta):
    # TF's LRNGrad: d in(k) = g(k) norm(k)^-beta
    #                        - 2 alpha beta in(k) sum_{j: |j-k| <= r} g(j) out(j) / norm(j)
    n = _lrn_norm(xp, x, r, bias, alpha)
    gy = g * y
    gy /= n
    cross = _window_sum(xp, gy, r)
    cross *= x
    cross *= _scalar(x, 2 * alpha * beta)
    xp.multiply(g, _pow_neg(xp, n, beta), out=out)
    out -= cross


def _by_rows(xp, fn, arrays, attrs):
    """fn(xp, *row blocks, out block, *attrs) over the rows (all but the depth axis)
    on the CPU budget's threads: each row's values depend on that row alone, so the
    same bits however the rows are split."""
    out = xp.empty_like(arrays[0])
    depth = arrays[0].shape[-1]
    rows = [a.reshape(-1, depth) for a in arrays]
    flat_out = out.reshape(-1, depth)
    if xp is not np or not all(a.flags.c_contiguous for a in arrays):
        fn(xp, *rows, flat_out, *attrs)
        return out

    def run(start: int, stop: int) -> None:
        with np.errstate(all="ignore"):  # (per thread: helpers do not inherit it)
            fn(xp, *(a[start:stop] for a in rows), flat_out[start:stop], *attrs)

    cpu_budget.parallel_for(len(flat_out), run, min_block=max(1, (1 << 15) // max(depth, 1)))
    return out


def _lrn_args(ctx):
    a = ctx.attrs
    r = int(a["depth_radius"])
    if r < 0:
        raise errors.InvalidArgumentError(None, None, f"depth_radius = {r} must be >= 0")
    return r, float(a["bias"]), float(a["alpha"]), float(a["beta"])


def _lrn_compute_dtype(dtype):
    # half and bfloat16 in float32 (NumPy's float16 powers lose more than TF's Eigen half)
    return np.float32 if dtype != np.float32 else None


LRN = register_op(
    "LRN",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={**_LRN_ATTRS, "T": _LRN_TYPES},
    shape_fn=_lrn_shape,
)


@LRN.kernel()
async def _lrn_kernel(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    if x.ndim != 4:
        raise errors.InvalidArgumentError(None, None, "in must be 4-dimensional")
    r, bias, alpha, beta = _lrn_args(ctx)
    up = _lrn_compute_dtype(x.dtype)
    xc = x if up is None else x.astype(up)
    out = await ctx.compute(_quiet, xp, _by_rows, xp, _lrn, (xc,), (r, bias, alpha, beta))
    return _as_dtype(xp, out, ctx.attrs["T"])


LRNGrad = register_op(
    "LRNGrad",
    inputs=["input_grads: T", "input_image: T", "output_image: T"],
    outputs=["output: T"],
    attrs={**_LRN_ATTRS, "T": _LRN_TYPES},
    shape_fn=_lrn_shape,
)


@LRNGrad.kernel()
async def _lrn_grad_kernel(ctx, g, x, y):
    xp = ctx.xp
    g, x, y = xp.asarray(g), xp.asarray(x), xp.asarray(y)
    if not (g.ndim == x.ndim == y.ndim == 4):
        raise errors.InvalidArgumentError(None, None, "inputs must be 4-dimensional")
    if not (g.shape == x.shape == y.shape):
        raise errors.InvalidArgumentError(
            None,
            None,
            "input_grads, input_image, and out_image should have the same shape: "
            f"{_shape_str(g.shape)}, {_shape_str(x.shape)}, {_shape_str(y.shape)}",
        )
    r, bias, alpha, beta = _lrn_args(ctx)
    up = _lrn_compute_dtype(x.dtype)
    if up is not None:
        g, x, y = g.astype(up), x.astype(up), y.astype(up)
    attrs = (r, bias, alpha, beta)
    out = await ctx.compute(_quiet, xp, _by_rows, xp, _lrn_grad, (g, x, y), attrs)
    return _as_dtype(xp, out, ctx.attrs["T"])


@LRN.gradient
def _lrn_gradient(op, grad):
    attrs = {k: op._attr(k) for k in _LRN_ATTRS}
    return _apply("LRNGrad", [grad, op.inputs[0], op.outputs[0]], attrs)


def local_response_normalization(
    input,  # noqa: A002 - TF's name
    depth_radius=5,
    bias=1,
    alpha=1,
    beta=0.5,
    name=None,
):
    """`tf.nn.local_response_normalization` (`tf.nn.lrn`): each value divided by
    (bias + alpha * the sum of squares over the 2 * depth_radius + 1 depths around it)
    ** beta (op LRN; a 4-D input)."""
    attrs = {
        "depth_radius": int(depth_radius),
        "bias": float(bias),
        "alpha": float(alpha),
        "beta": float(beta),
    }
    return ops.apply_op("LRN", [input], attrs, name=name).outputs[0]


lrn = local_response_normalization


# -- Softmax, LogSoftmax ---------------------------------------------------------------------


def _softmax_shape(op):
    shape = op.inputs[0].shape
    try:
        shape.with_rank_at_least(1)
    except ValueError:
        raise ValueError(f"Shape must be at least rank 1 but is rank {shape.ndims}") from None
    return [shape]


# The array methods rather than `xp.max` / `xp.sum`: the same reductions, without
# NumPy's Python-level dispatch (~5 us a call: two thirds of a one-row softmax).
def _softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(xp, x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))


_DIRECT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _softmax_op(op_type: str, fn):
    op_def = register_op(
        op_type,
        inputs=["logits: T"],
        outputs=[f"{'logsoftmax' if op_type == 'LogSoftmax' else 'softmax'}: T"],
        attrs={"T": FLOATING},
        shape_fn=_softmax_shape,
    )

    @op_def.kernel()
    async def _kernel(ctx, logits):
        xp = ctx.xp
        logits = xp.asarray(logits)
        if logits.ndim < 1:
            raise errors.InvalidArgumentError(
                None, None, f"logits must have >= 1 dimension, got {_shape_str(logits.shape)}"
            )
        if logits.size == 0:
            return logits
        out = await ctx.compute(_quiet, xp, fn, xp, logits)
        return _as_dtype(xp, out, ctx.attrs["T"])

    def _inline(ctx):
        """The kernel's inline form (kernel_api), on a CPU: the kernel's call run now
        when the device would run it inline untimed."""
        run_inline = getattr(ctx.device, "run_inline", None)
        if run_inline is None:
            return None
        dtype = ctx.attrs["T"].np_dtype

        def inline(logits):
            if type(logits) is np.ndarray and logits.ndim >= 1 and logits.size:
                out = run_inline(_quiet, (np, fn, np, logits))  # (the kernel's call)
                if out is not NOT_INLINE and out.dtype != dtype:
                    out = out.astype(dtype)
                return out
            return NOT_INLINE

        return inline

    def _direct(ctx, avals):
        """The kernel's direct form (kernel_api), on a CPU: the kernel's one call for
        float32/float64 logits of the attribute's dtype (nothing to cast after)."""
        if getattr(ctx.device, "settled_seconds", None) is None or len(avals) != 1:
            return None
        aval = avals[0]
        dtype = np.dtype(ctx.attrs["T"].np_dtype)
        if aval is None or aval[1] != dtype or dtype not in _DIRECT_DTYPES:
            return None
        shape = aval[0]
        if not shape or 0 in shape:
            return None

        def direct(logits):
            return _quiet(np, fn, np, logits)

        return direct, (_quiet, (np, fn, np, template(shape, dtype))), [(shape, dtype)]

    _kernel.inline = _inline
    _kernel.direct = _direct
    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


Softmax = _softmax_op("Softmax", _softmax)
LogSoftmax = _softmax_op("LogSoftmax", _log_softmax)


def _swap_to_last(x, axis, rank: int, name=None):
    if isinstance(axis, ops.Tensor):  # known only when run: perm = range with axis <-> last
        dims = np.arange(rank, dtype=np.int32)
        last = np.full(rank, rank - 1, np.int32)
        at_axis = ops.apply_op("Equal", [dims, axis]).outputs[0]
        at_last = np.arange(rank) == rank - 1
        perm = ops.apply_op("Select", [at_axis, last, dims]).outputs[0]
        axis_vec = ops.apply_op("Fill", [np.array([rank], np.int32), axis]).outputs[0]
        perm = ops.apply_op("Select", [at_last, axis_vec, perm]).outputs[0]
        return ops.apply_op("Transpose", [x, perm], name=name).outputs[0]
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    perm = np.asarray(perm, dtype=np.int32)
    return ops.apply_op("Transpose", [x, perm], name=name).outputs[0]


def _checked_axis(axis, rank: int):
    """`axis` once an Assert has checked it is in [-rank, rank): TF's transposes fail the
    step with InvalidArgumentError for a tensor axis out of range."""
    ok = ops.apply_op(
        "LogicalAnd",
        [
            ops.apply_op("GreaterEqual", [axis, np.int32(-rank)]).outputs[0],
            ops.apply_op("Less", [axis, np.int32(rank)]).outputs[0],
        ],
    ).outputs[0]
    msg = f"`dim` must be in the range [{-rank}, {rank}) where {rank} is the number of dimensions"
    check = ops.apply_op("Assert", [ok, [ops.convert_to_tensor(msg), axis]], name="check_axis")
    with ops.control_dependencies([check]):
        return ops.apply_op("Identity", [axis]).outputs[0]


def _softmax_builder(op_type: str, logits, axis, name, dim):
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'.")
    axis = -1 if axis is None and dim is None else (axis if axis is not None else dim)
    logits = ops.convert_to_tensor(logits)
    rank = logits.shape.ndims
    if isinstance(axis, ops.Tensor):  # TF accepts a scalar int32 tensor axis
        value = ops.constant_value(axis)
        if value is not None:
            axis = int(value)
        elif rank is None:
            raise ValueError(f"{op_type} over a tensor axis needs a tensor of known rank")
        else:
            with _builder_scope(name, op_type, [logits]) as op_name:
                axis = _checked_axis(axis, rank)
                axis = ops.apply_op("FloorMod", [axis, np.int32(rank)]).outputs[0]
                out = ops.apply_op(op_type, [_swap_to_last(logits, axis, rank)]).outputs[0]
            result = _swap_to_last(out, axis, rank, name=op_name)
            result.set_shape(logits.shape)
            return result
    if axis == -1 or (rank is not None and axis == rank - 1):
        return ops.apply_op(op_type, [logits], name=name).outputs[0]
    if rank is None:
        raise ValueError(f"{op_type} over axis {axis} needs a tensor of known rank")
    if not -rank <= axis < rank:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"`dim` must be in the range [{-rank}, {rank}) where {rank} is the number of "
            f"dimensions in the input. Received: dim={axis}",
        )
    axis %= rank
    with _builder_scope(name, op_type, [logits]) as op_name:
        out = ops.apply_op(op_type, [_swap_to_last(logits, axis, rank)]).outputs[0]
    result = _swap_to_last(out, axis, rank, name=op_name)
    result.set_shape(logits.shape)  # Transpose's shape function may not know the perm
    return result


@_dispatch.add_dispatch_support
def softmax(logits, axis=None, name=None, dim=None):
    """Computes softmax along `axis` (default: the last): exp(x) / sum(exp(x)).

    Raises:
      ValueError: both axis and dim given, or a rank-0 input.
      InvalidArgumentError: `axis` out of range for the input's rank.
    """
    return _softmax_builder("Softmax", logits, axis, name, dim)


@_dispatch.add_dispatch_support
def log_softmax(logits, axis=None, name=None, dim=None):
    """Computes log(softmax(logits)) along `axis` (default: the last).

    Raises:
      ValueError: both axis and dim given, or a rank-0 input.
      InvalidArgumentError: `axis` out of range for the input's rank.
    """
    return _softmax_builder("LogSoftmax", logits, axis, name, dim)


# -- BiasAdd ---------------------------------------------------------------------------------


def _channel_axis(data_format: str, rank: int) -> int:
    return 1 if data_format == "NCHW" else rank - 1


def _check_bias_rank(value, data_format: str) -> None:
    """TF's shape check of BiasAdd and BiasAddGrad: rank >= 2, and >= 3 for NCHW (its
    kernels take a rank-2 NCHW value whose rank was unknown when built, as TF's do)."""
    least = 3 if data_format == "NCHW" else 2
    if value.ndims is not None and value.ndims < least:
        raise ValueError(f"Shape must be at least rank {least} but is rank {value.ndims}")


def _bias_add_shape(op):
    value = op.inputs[0].shape
    bias = op.inputs[1].shape.with_rank(1)
    fmt = op._attr("data_format")
    _check_bias_rank(value, fmt)
    if value.ndims is None:
        return [value]
    axis = _channel_axis(fmt, value.ndims)
    channels = value[axis]
    if not channels.is_compatible_with(bias[0]):
        raise ValueError(f"Dimensions must be equal, but are {channels.value} and {bias[0].value}")
    dims = value.dims
    dims[axis] = channels.merge_with(bias[0])
    return [tensor_shape.TensorShape(dims)]


BiasAdd = register_op(
    "BiasAdd",
    inputs=["value: T", "bias: T"],
    outputs=["output: T"],
    attrs={"T": NUMERIC, "data_format": "NHWC"},
    shape_fn=_bias_add_shape,
)


@BiasAdd.kernel()
async def _bias_add(ctx, value, bias):
    return await _bias_add_impl(ctx, value, bias, False)


async def _bias_add_relu(ctx, value, bias):
    """BiasAdd whose only consumer is a Relu (the graph pass below): both in one pass."""
    return await _bias_add_impl(ctx, value, bias, True)


def _add_relu_blocked(value, bias, out):
    """out = max(value + bias, 0), a block of rows at a time so that the second pass
    finds its block in cache (one trip through memory instead of two).  Few channels
    (conv layers: 32) would make NumPy's inner loops that short: rows of several pixels
    are added to the bias repeated as many times (isolated, LeNet's conv1 output:
    1.6-1.7 -> 1.3 ms)."""
    c = value.shape[-1]
    if value.size == 0:
        return out
    pixels = value.size // c
    r = max(1, _ADD_RELU_ROW // max(c, 1))
    while r > 1 and pixels % r:
        r -= 1
    rows = value.reshape(-1, r * c)
    dst = out.reshape(rows.shape)
    if r > 1:
        bias = np.tile(bias, r)
    elif not bias.flags.writeable:  # (a variable's buffer: the compiled loops take
        bias = bias.copy()  # writable arrays only)
    step = max(1, _ADD_RELU_BLOCK // max(1, rows.strides[0]))
    zero = out.dtype.type(0)
    jit = cnn_jit.loops()
    if jit is not None and not cnn_jit.usable(rows, dst, bias):
        jit = None

    def blocks(start: int, stop: int) -> None:
        if jit is not None:  # one compiled pass (ops/cnn_jit.py)
            if out is value:
                jit["_add_relu_inplace"](rows[start:stop], bias)
            else:
                jit["_add_relu"](rows[start:stop], bias, dst[start:stop])
            return
        for a in range(start, stop, step):
            end = min(a + step, stop)
            blk = dst[a:end]
            np.add(rows[a:end], bias, out=blk)
            np.maximum(blk, zero, out=blk)

    # element-wise: parts of the rows (conv_ops._parts: fixed by size) share the cores
    _each_part(np, _parts(np, rows.shape[0], rows.strides[0], block_bytes=1 << 62), blocks)
    return out


_ADD_RELU_ROW = 1024  # values per row of `_add_relu_blocked` (when the channels divide)
_ADD_RELU_BLOCK = 256 << 10  # bytes per block: the two passes meet in L2


async def _bias_add_impl(ctx, value, bias, relu: bool):
    xp = ctx.xp
    value, bias = xp.asarray(value), xp.asarray(bias)
    if value.ndim < 2:
        raise errors.InvalidArgumentError(
            None, None, f"Input tensor must be at least 2D: {_shape_str(value.shape)}"
        )
    if bias.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Biases must be 1D: {_shape_str(bias.shape)}"
        )
    axis = _channel_axis(ctx.attrs["data_format"], value.ndim)
    if value.shape[axis] != bias.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Must provide as many biases as the channel dimension of the input tensor: "
            f"{_shape_str(bias.shape)} vs. {_shape_str(value.shape)}",
        )
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    dtype = ctx.attrs["T"].np_dtype
    if relu and xp is np and axis == value.ndim - 1 and value.dtype == dtype == bias.dtype:
        if value.flags.c_contiguous:
            out = value if ctx.may_forward(0, value) else np.empty_like(value)
            return await ctx.compute(_add_relu_blocked, value, bias, out)
    if ctx.may_forward(0, value) and value.dtype == dtype:
        out = await ctx.compute(xp.add, value, bias.reshape(shape), value)
    else:
        out = await ctx.compute(xp.add, value, bias.reshape(shape))
        out = _as_dtype(xp, out, ctx.attrs["T"])
    if relu:  # the fused Relu's part, when the blocked pass did not apply
        out = await ctx.compute(xp.maximum, out, out.dtype.type(0))
    return out


def bias_add(value, bias, data_format=None, name=None):
    """Adds a 1-D `bias` along the channel axis of `value` (last for NHWC, 1 for NCHW).

    Raises:
      ValueError: a bad data_format, bias not 1-D, value of rank < 2, or the channel
        dimension differs from the bias length.
      TypeError: value and bias have different dtypes.
    """
    if data_format is None:
        fmt = "NHWC"
    elif data_format.startswith("NC"):
        fmt = "NCHW"
    elif data_format.startswith("N") and data_format.endswith("C"):
        fmt = "NHWC"
    else:
        raise ValueError("data_format must be of the form `N...C` or `NC...`")
    with _builder_scope(name, "BiasAdd", [value, bias]) as op_name:
        value = ops.convert_to_tensor(value, name="input")
        if isinstance(bias, ops.Tensor):
            if bias.dtype != value.dtype:
                raise TypeError(
                    f"Input 'bias' of 'BiasAdd' Op has type {bias.dtype.name} that does not "
                    f"match type {value.dtype.name} of argument 'value'."
                )
        else:
            bias = ops.convert_to_tensor(bias, dtype=value.dtype, name="bias")
    return ops.apply_op("BiasAdd", [value, bias], {"data_format": fmt}, name=op_name).outputs[0]


# -- activation backprops (TF's ReluGrad, Relu6Grad, EluGrad, SoftplusGrad, SoftsignGrad) ----


def _check_same_shape(g, x, second: str) -> None:
    if g.shape != x.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"gradients and {second} must be the same shape: "
            f"{_shape_str(g.shape)} vs. {_shape_str(x.shape)}",
        )


def _grad_op(op_type: str, second: str, fn, types: TypeConstraint, inplace=None, out_fn=None):
    """Register `backprops = fn(xp, gradients, second)` (one element-wise pass);
    `inplace(xp, g, x)` writes it into `gradients` when nothing else holds them;
    `out_fn(xp, g, x, out)` (ops.elementwise) does both, over blocks shared by the CPU
    budget's threads for large inputs."""
    op_def = register_op(
        op_type,
        inputs=["gradients: T", f"{second}: T"],
        outputs=["backprops: T"],
        attrs={"T": types},
        shape_fn=lambda op: [op.inputs[0].shape.merge_with(op.inputs[1].shape)],
    )

    @op_def.kernel()
    async def _kernel(ctx, g, x):
        xp = ctx.xp
        g, x = xp.asarray(g), xp.asarray(x)
        _check_same_shape(g, x, second)
        want = ctx.attrs["T"].np_dtype
        if out_fn is not None and g.dtype == want and x.dtype == want:
            out = g if ctx.may_forward(0, g) else None
            return await ctx.compute(_quiet, xp, _ew.parallel, xp, out_fn, (g, x), out)
        if inplace is not None and ctx.may_forward(0, g) and g.dtype == want:
            return await ctx.compute(_quiet, xp, inplace, xp, g, x)
        out = await ctx.compute(_quiet, xp, fn, xp, g, x)
        return _as_dtype(xp, out, ctx.attrs["T"])

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


# TF's ReluGradFunctor is `gradients * (features > 0)` (so inf * 0 is nan there too), and a
# multiply by the mask is 4-6x faster in NumPy than where(mask, g, 0).
ReluGrad = _grad_op(
    "ReluGrad",
    "features",
    lambda xp, g, x: g * (x > 0),
    REAL,
    inplace=lambda xp, g, x: xp.multiply(g, x > 0, out=g),
)
Relu6Grad = _grad_op(
    "Relu6Grad",
    "features",
    lambda xp, g, x: xp.where((x > 0) & (x < 6), g, _zero(g)),
    REAL,
)
EluGrad = _grad_op(
    "EluGrad", "outputs", lambda xp, g, y: xp.where(y < 0, g * (y + _scalar(y, 1)), g), FLOATING
)
SoftplusGrad = _grad_op(
    "SoftplusGrad",
    "features",
    lambda xp, g, x: _ew.softplus_grad(xp, g, x),
    FLOATING,
    out_fn=_ew.softplus_grad,
)
SoftsignGrad = _grad_op(
    "SoftsignGrad",
    "features",
    lambda xp, g, x: g / xp.square(_scalar(x, 1) + xp.absolute(x)),
    FLOATING,
)

SeluGrad = _grad_op(
    "SeluGrad",
    "outputs",
    lambda xp, g, y: xp.where(
        y < 0, g * (y + _scalar(y, _SELU_SCALE_ALPHA)), g * _scalar(y, _SELU_SCALE)
    ),
    FLOATING,
)

LeakyReluGrad = register_op(
    "LeakyReluGrad",
    inputs=["gradients: T", "features: T"],
    outputs=["backprops: T"],
    attrs={"alpha": 0.2, "T": FLOATING},
    shape_fn=lambda op: [op.inputs[0].shape.merge_with(op.inputs[1].shape)],
)


def _leaky_grad(xp, g, x, alpha):
    # TF: (x > 0).select(gradients, gradients * alpha)
    return xp.where(x > 0, g, g * _scalar(g, alpha))


@LeakyReluGrad.kernel()
async def _leaky_relu_grad_kernel(ctx, g, x):
    xp = ctx.xp
    g, x = xp.asarray(g), xp.asarray(x)
    _check_same_shape(g, x, "features")
    out = await ctx.compute(_quiet, xp, _leaky_grad, xp, g, x, ctx.attrs["alpha"])
    return _as_dtype(xp, out, ctx.attrs["T"])


def _apply(op_type, inputs, attrs=None):
    return ops.apply_op(op_type, inputs, attrs).outputs[0]


@Relu.gradient
def _relu_grad(op, grad):
    return _apply("ReluGrad", [grad, op.outputs[0]])


@Relu6.gradient
def _relu6_grad(op, grad):
    return _apply("Relu6Grad", [grad, op.inputs[0]])


@Elu.gradient
def _elu_grad(op, grad):
    return _apply("EluGrad", [grad, op.outputs[0]])


@Softplus.gradient
def _softplus_grad(op, grad):
    return _apply("SoftplusGrad", [grad, op.inputs[0]])


@Softsign.gradient
def _softsign_grad(op, grad):
    return _apply("SoftsignGrad", [grad, op.inputs[0]])


@Selu.gradient
def _selu_grad(op, grad):
    return _apply("SeluGrad", [grad, op.outputs[0]])


@LeakyRelu.gradient
def _leaky_relu_grad(op, grad):
    return _apply("LeakyReluGrad", [grad, op.inputs[0]], {"alpha": op._attr("alpha")})


def _zeros_like(t):
    return _apply("ZerosLike", [t])


def _where(cond, a, b):
    return _apply("Select", [cond, a, b])


@ReluGrad.gradient
def _relu_grad_grad(op, grad):
    return [_apply("ReluGrad", [grad, op.inputs[1]]), _zeros_like(op.inputs[1])]


@Relu6Grad.gradient
def _relu6_grad_grad(op, grad):
    return [_apply("Relu6Grad", [grad, op.inputs[1]]), _zeros_like(op.inputs[1])]


@EluGrad.gradient
def _elu_grad_grad(op, grad):
    g, y = op.inputs
    neg = _apply("Less", [y, _apply("ZerosLike", [y])])
    return [_apply("EluGrad", [grad, y]), _where(neg, grad * g, _zeros_like(y))]


@SeluGrad.gradient
def _selu_grad_grad(op, grad):
    # TF's _SeluGradGrad
    g, y = op.inputs
    neg = _apply("Less", [y, _apply("ZerosLike", [y])])
    return [_apply("SeluGrad", [grad, y]), _where(neg, grad * g, _zeros_like(y))]


@LeakyReluGrad.gradient
def _leaky_relu_grad_grad(op, grad):
    x = op.inputs[1]
    return [
        _apply("LeakyReluGrad", [grad, x], {"alpha": op._attr("alpha")}),
        _zeros_like(x),
    ]


@SoftplusGrad.gradient
def _softplus_grad_grad(op, grad):
    g, x = op.inputs
    s = _apply("Sigmoid", [x])
    return [_apply("SoftplusGrad", [grad, x]), grad * g * s * (1.0 - s)]


@SoftsignGrad.gradient
def _softsign_grad_grad(op, grad):
    g, x = op.inputs
    d = 1.0 + _apply("Abs", [x])
    return [_apply("SoftsignGrad", [grad, x]), grad * g * -2.0 * _apply("Sign", [x]) / (d * d * d)]


def _sum_last(t):
    axis = np.asarray([-1], np.int32)
    return _apply("Sum", [t, axis], {"keep_dims": True})


@Softmax.gradient
def _softmax_grad(op, grad):
    y = op.outputs[0]
    return (grad - _sum_last(grad * y)) * y


@LogSoftmax.gradient
def _log_softmax_grad(op, grad):
    return grad - _sum_last(grad) * _apply("Exp", [op.outputs[0]])


# -- BiasAddGrad ---------------------------------------------------------------------------


def _bias_add_grad_shape(op):
    value = op.inputs[0].shape
    if value.ndims is None:
        return [tensor_shape.unknown_shape(1)]
    _check_bias_rank(value, op._attr("data_format"))
    return [tensor_shape.TensorShape([value[_channel_axis(op._attr("data_format"), value.ndims)]])]


BiasAddGrad = register_op(
    "BiasAddGrad",
    inputs=["out_backprop: T"],
    outputs=["output: T"],
    attrs={"T": NUMERIC, "data_format": "NHWC"},
    shape_fn=_bias_add_grad_shape,
)


@BiasAddGrad.kernel()
async def _bias_add_grad(ctx, dy):
    xp = ctx.xp
    dy = xp.asarray(dy)
    if dy.ndim < 2:
        raise errors.InvalidArgumentError(
            None, None, f"Input tensor must be at least 2D: {_shape_str(dy.shape)}"
        )
    axis = _channel_axis(ctx.attrs["data_format"], dy.ndim)
    if xp is np and dy.dtype in eigen_reduce.SUPPORTED:
        # TF's redux functors' order of additions (its bits; the rows' split into blocks
        # depends on the intra-op thread count, as TF's)
        nchw = axis == 1 and ctx.attrs["data_format"] == "NCHW"
        return await ctx.compute(eigen_reduce.bias_add_grad, dy, nchw, cpu_budget.budget())
    axes = tuple(i for i in range(dy.ndim) if i != axis)
    out = await ctx.compute(xp.sum, dy, axes)
    return _as_dtype(xp, out, ctx.attrs["T"])


@BiasAdd.gradient
def _bias_add_grad_fn(op, grad):
    fmt = op._attr("data_format")
    return [grad, _apply("BiasAddGrad", [grad], {"data_format": fmt})]


@BiasAddGrad.gradient
def _bias_add_grad_grad(op, grad):
    """Broadcast the bias-shaped gradient back over out_backprop's shape (TF's)."""
    dy = op.inputs[0]
    rank = dy.shape.ndims
    if rank is None:
        raise ValueError("BiasAddGrad's gradient needs an input of known rank")
    shape = [1] * rank
    shape[_channel_axis(op._attr("data_format"), rank)] = -1
    expanded = _apply("Reshape", [grad, np.asarray(shape, np.int32)])
    return _apply("Add", [_zeros_like(dy), expanded])


# -- graph pass: BiasAdd -> Relu in one pass ----------------------------------------------


FusedBiasAddRelu = register_op(
    "_FusedBiasAddRelu",
    inputs=["value: T", "bias: T"],
    outputs=["output: T"],
    attrs={"T": NUMERIC, "data_format": "NHWC"},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedBiasAddRelu")  # introduced after the gradients were built


@FusedBiasAddRelu.kernel("CPU")
async def _fused_bias_add_relu(ctx, value, bias):
    return await _bias_add_relu(ctx, value, bias)


def _bias_add_of_relu(view, i: int, node):
    """The BiasAdd node whose output only CPU Relu node i reads (neither reading a
    variable's reference, one device), or None."""
    if node.op.type != "Relu" or node.device.device_type != "CPU" or view.reads_ref(i):
        return None
    j, out = node.inputs[0]
    if j == "feed" or out != 0 or not view.available(i, j):
        return None
    src = view.nodes[j]
    if src.op.type != "BiasAdd" or src.device is not node.device or view.reads_ref(j):
        return None
    if view.sole_consumer(j) != i:  # the pre-activation is used elsewhere (or fetched)
        return None
    return j


def fuse_bias_add_relu(view) -> None:
    """A BiasAdd whose only consumer is a Relu: one _FusedBiasAddRelu, one pass over
    memory (TF's grappler fuses the same pair)."""
    for i, node in enumerate(view.nodes):
        j = _bias_add_of_relu(view, i, node)
        if j is None:
            continue
        src = view.nodes[j]
        attrs = {"T": src.op._attr("T"), "data_format": src.op._attr("data_format")}
        view.fuse(i, "_FusedBiasAddRelu", attrs, list(src.inputs), absorbed=[j])


# -- graph pass: Conv2D -> BiasAdd -> Relu (-> MaxPool) of few input channels in one pass --
#
# TF's grappler makes `_FusedConv2D` (BiasAdd, Relu) of this chain.  Here it is formed
# where the input has at most cnn_jit's few channels and the convolution's stride and
# dilation are 1 (LeNet's first layer), for cnn_jit's compiled loop, which writes the
# activation once with no column matrix (the layer's [64,28,28,32] output, 6.4 MB, was
# written by Conv2D, then read and written again by _FusedBiasAddRelu).  A 2x2 stride-2
# MaxPool of the activation joins it (`_FusedConv2DBiasAddReluMaxPool`, outputs the pool
# and the activation, which the gradients read): the loop pools each pair of rows it has
# just written, where MaxPool read the whole activation again.  The kernels take every
# case the ops they replace take: where the loop does not apply (other sizes or dtypes,
# odd sizes for the pool, the loop not compiled yet) they run Conv2D's kernel, then
# BiasAdd's with the ReLU on the convolution's fresh output, then MaxPool's.

# Whether the pass forms the fused nodes (benchmarks' A/B: ab_inproc.py --attr), and
# whether it takes the MaxPool in.
_FUSE_CONV = True
_FUSE_CONV_POOL = True
# Whether the pass also takes a convolution of more input channels that goes spectral
# (conv_ops.spectral_suits: LeNet's second layer), whose kernel applies the bias and ReLU
# (and the pool) to each block of the inverse transform's output (`_spectral_run`).
_FUSE_SPECTRAL = True

FusedConv2DBiasAddRelu = register_op(
    "_FusedConv2DBiasAddRelu",
    inputs=["input: T", "filter: T", "bias: T"],
    outputs=["output: T"],
    attrs=dict(conv_ops._CONV_ATTRS),
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedConv2DBiasAddRelu")  # introduced after the gradients were built

FusedConv2DBiasAddReluMaxPool = register_op(
    "_FusedConv2DBiasAddReluMaxPool",
    inputs=["input: T", "filter: T", "bias: T"],
    outputs=["pooled: T", "activation: T", "argmax: uint8"],
    attrs={
        **conv_ops._CONV_ATTRS,
        "ksize": REQUIRED,
        "pool_strides": REQUIRED,
        "pool_padding": REQUIRED,
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()] * 3,
)
NotDifferentiable("_FusedConv2DBiasAddReluMaxPool")


class _OwnValue:
    """The context `_bias_add_impl` reads, for a value this kernel made (writable)."""

    def __init__(self, ctx):
        self.xp = ctx.xp
        self.attrs = {"data_format": ctx.attrs["data_format"], "T": ctx.attrs["T"]}
        self.compute = ctx.compute

    def may_forward(self, k, x) -> bool:
        return True


def _direct_conv_loop(ctx, x, w, bias, pool: bool = False):
    """(cnn_jit's compiled loop, geometry) where it takes this convolution (and the 2x2
    stride-2 pooling of its output, `pool`), else None."""
    attrs = ctx.attrs
    if ctx.xp is not np or attrs["data_format"] != "NHWC" or attrs["padding"] == "EXPLICIT":
        return None
    f32 = np.dtype(np.float32)
    if not (x.dtype == w.dtype == bias.dtype == f32 and attrs["T"].np_dtype == f32):
        return None
    if x.ndim != 4 or w.ndim != 4 or bias.ndim != 1 or 0 in x.shape or 0 in w.shape:
        return None
    kh, kw, c, oc = w.shape
    if x.shape[3] != c or c > cnn_jit.CONV_MAX_C or bias.shape[0] != oc:
        return None
    ones = [1, 1, 1, 1]
    if list(attrs["strides"]) != ones or list(attrs.get("dilations") or ones) != ones:
        return None
    g = conv_ops._Geom(attrs, x.shape, w.shape)  # (TF's errors for a bad geometry)
    if 0 in g.out_nhwc() or (pool and (g.oh % 2 or g.ow % 2)):
        return None
    fn = cnn_jit.conv_bias_relu(kh, kw, c, oc, pool)
    return None if fn is None else (fn, g)


def _conv_bias_relu(fn, g, x, w, bias, pool: bool = False):
    """max(conv2d(x, w) + bias, 0) by the compiled loop `fn`, the batch's parts on the
    budget's threads (each element computed alike however the parts fall); with `pool`,
    (its 2x2 stride-2 max pooling, the activation, each window's first-maximum code)."""
    xpad = np.require(conv_ops.pad_spatial(np, x, *g.pad), requirements=("C", "W"))
    w = np.require(w, requirements=("C", "W"))  # (numba types read-only arrays apart)
    bias = np.require(bias, requirements=("C", "W"))
    out = np.empty(g.out_nhwc(), np.float32)
    pool_shape = (g.n, g.oh // 2, g.ow // 2, g.oc) if pool else (1, 1, 1, 1)
    pooled = np.empty(pool_shape, np.float32)
    code = np.empty(pool_shape, np.uint8)
    sizes = (g.kh, g.kw, g.c, g.oc, int(pool))

    def part(s: int, e: int) -> None:
        if pool:
            fn(xpad[s:e], w, bias, out[s:e], pooled[s:e], code[s:e], *sizes)
        else:
            fn(xpad[s:e], w, bias, out[s:e], pooled, code, *sizes)

    per_image = g.oh * g.ow * (g.oc + g.kh * g.kw * g.c) * 4
    _each_part(np, _parts(np, g.n, per_image, block_bytes=1 << 62), part)
    return (pooled, out, code) if pool else out


async def _spectral_run(ctx, x, w, bias, pool: bool):
    """conv_ops' spectral convolution with the bias, ReLU (and pool) applied to its
    blocks (`conv_ops.spectral_bias_relu`), or None where it does not take them."""
    if ctx.xp is not np or not _FUSE_SPECTRAL:
        return None
    g = conv_ops.spectral_bias_relu_geom(ctx.attrs, x, w, bias, pool)
    if g is None:
        return None
    ctx.device.check_alloc(g.n * g.oh * g.ow * g.kh * g.kw * g.c, ctx.attrs["T"])
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * x.itemsize)
    token = conv_ops._step_token()  # (the spectrum of x is remembered for the gradient)
    fn = conv_ops.spectral_bias_relu
    return await ctx.compute(conv_ops._in_step, token, fn, g, x, w, bias, pool, cost=cost)


@functools.lru_cache(maxsize=8)
def _zeros(size: int):
    return np.zeros(size, np.float32)


def _finite(a) -> bool:
    """Whether float32 `a` holds no NaN or infinity: its dot product with zeros is then
    0, and NaN otherwise (one BLAS pass, ~30 us for 1.6 MB)."""
    flat = a.reshape(-1)
    return math.isfinite(float(np.dot(flat, _zeros(flat.size))))


def _onednn_bias_relu(g, x, w, bias, pool: bool):
    """max(conv2d(x, w) + bias, 0) on oneDNN; with `pool`, (its 2x2 stride-2 max pooling,
    the activation, each window's first-maximum code) by cnn_jit's loops in the same call
    (pooled and code None while they are not compiled: the caller pools); None where
    oneDNN does not take it.  The ReLU is oneDNN's post-op where every operand is finite
    (then no sum is NaN); else np.maximum after it, as TF's Relu keeps a NaN where
    oneDNN's gives 0."""
    finite = _finite(x) and _finite(w) and _finite(bias)
    y = onednn.conv_forward(g, x, w, "NHWC", bias, finite)
    if y is None:
        return None
    if not finite:
        np.maximum(y, 0, out=y)
    if not pool:
        return y
    jit = cnn_jit.loops()
    if jit is None or not cnn_jit.usable(y):
        return None, y, None
    pooled = np.empty((g.n, g.oh // 2, g.ow // 2, g.oc), np.float32)
    code = np.empty(pooled.shape, np.uint8)
    x6 = y.reshape(g.n, g.oh // 2, 2, g.ow // 2, 2, g.oc)

    def part(s: int, e: int) -> None:
        jit["_pool_2x2"](x6[s:e], pooled[s:e])
        jit["_first_max_2x2"](x6[s:e], pooled[s:e], code[s:e])

    _each_part(np, _parts(np, g.n, g.oh * g.ow * g.oc * 4), part)
    return pooled, y, code


async def _onednn_run(ctx, x, w, bias, pool: bool = False):
    """max(conv2d(x, w) + bias, 0) on oneDNN, the bias and ReLU its post-ops (each value
    as its Conv2D, then BiasAdd and Relu, compute it), with `pool` as `_onednn_bias_relu`
    gives it; None where oneDNN does not take it."""
    if not conv_ops._on_onednn(ctx.xp, ctx.attrs["T"].np_dtype, x, w, bias):
        return None
    if ctx.attrs["data_format"] != "NHWC" or x.ndim != 4 or w.ndim != 4 or bias.ndim != 1:
        return None
    if 0 in x.shape or 0 in w.shape or x.shape[3] != w.shape[2] or bias.shape[0] != w.shape[3]:
        return None
    g = conv_ops._Geom(ctx.attrs, x.shape, w.shape)  # (TF's errors for a bad geometry)
    if 0 in g.out_nhwc() or g.groups != 1:
        return None
    ctx.device.check_alloc(g.n * g.oh * g.ow * g.oc, ctx.attrs["T"])
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * x.itemsize)
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    if pool and (g.oh % 2 or g.ow % 2):
        return None
    bias = np.ascontiguousarray(bias)
    return await ctx.compute(_onednn_bias_relu, g, x, w, bias, pool, cost=cost)


async def _conv_bias_relu_run(ctx, x, w, bias, loop: bool = True):
    x, w, bias = np.asarray(x), np.asarray(w), np.asarray(bias)
    y = await _onednn_run(ctx, x, w, bias)
    if y is not None:
        return y
    direct = _direct_conv_loop(ctx, x, w, bias) if loop else None
    if direct is not None:
        fn, g = direct
        cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * x.itemsize)
        return await ctx.compute(_conv_bias_relu, fn, g, x, w, bias, cost=cost)
    y = await _spectral_run(ctx, x, w, bias, False)
    if y is not None:
        return y
    y = await conv_ops._conv2d(ctx, x, w)
    return await _bias_add_impl(_OwnValue(ctx), y, bias, True)


@FusedConv2DBiasAddRelu.kernel("CPU")
async def _fused_conv2d_bias_add_relu(ctx, x, w, bias):
    return await _conv_bias_relu_run(ctx, x, w, bias)


@FusedConv2DBiasAddReluMaxPool.kernel("CPU")
async def _fused_conv2d_bias_add_relu_max_pool(ctx, x, w, bias):
    x, w, bias = np.asarray(x), np.asarray(w), np.asarray(bias)
    out = await _onednn_run(ctx, x, w, bias, pool=True)
    if out is not None and out[0] is not None:
        return list(out)
    if out is not None:  # (oneDNN's activation; cnn_jit's loops not compiled yet)
        y = out[1]
    else:
        direct = _direct_conv_loop(ctx, x, w, bias, pool=True)
        if direct is not None:
            fn, g = direct
            cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * x.itemsize)
            return list(await ctx.compute(_conv_bias_relu, fn, g, x, w, bias, True, cost=cost))
        out = await _spectral_run(ctx, x, w, bias, True)
        if out is not None:
            return list(out)
        # (not the loop without the pool: a second specialisation would compile meanwhile)
        y = await _conv_bias_relu_run(ctx, x, w, bias, loop=False)
    n, h, wd, _ = y.shape
    if h % 2 or wd % 2 or y.dtype.kind != "f":  # (the pass fuses even static sizes only)
        raise errors.InternalError(None, None, f"cannot code the pooling of {y.shape}")
    attrs = {
        "ksize": ctx.attrs["ksize"],
        "strides": ctx.attrs["pool_strides"],
        "padding": ctx.attrs["pool_padding"],
        "explicit_paddings": [],
        "data_format": "NHWC",
    }
    pooled = await _max_pool_run(ctx, attrs, y)
    return [pooled, y, await ctx.compute(first_max_code, y, pooled)]


def fuse_conv2d_bias_add_relu(view) -> None:
    """Relu(BiasAdd(Conv2D(x, w), b)), each value feeding only the next, as one
    _FusedConv2DBiasAddRelu where cnn_jit's loop may take it (float32 NHWC, stride and
    dilation 1, SAME or VALID, a filter of at most CONV_MAX_C input channels); with a
    2x2 stride-2 MaxPool among the Relu's consumers, _FusedConv2DBiasAddReluMaxPool in
    the MaxPool's place, whose second output the Relu's other consumers then read."""
    if not _FUSE_CONV:
        return
    for i, node in enumerate(view.nodes):
        j = _bias_add_of_relu(view, i, node)
        if j is None:
            continue
        add = view.nodes[j]
        if add.op._attr("data_format") != "NHWC":
            continue
        m, out = add.inputs[0]
        if m == "feed" or out != 0 or not view.available(m):
            continue
        conv = view.nodes[m]
        if conv.op.type != "Conv2D" or conv.device is not node.device or view.reads_ref(m):
            continue
        if view.sole_consumer(m) != j or not _direct_conv_attrs(conv.op):
            continue
        attrs = {k: conv.op._attr(k) for k in conv_ops._CONV_ATTRS}
        inputs = [*conv.inputs, add.inputs[1]]
        pool = _pool_of(view, i) if _FUSE_CONV_POOL else None
        if pool is None:
            view.fuse(i, "_FusedConv2DBiasAddRelu", attrs, inputs, absorbed=[j, m])
            continue
        mp = view.nodes[pool].op
        attrs["ksize"] = mp._attr("ksize")
        attrs["pool_strides"] = mp._attr("strides")
        attrs["pool_padding"] = mp._attr("padding")
        absorbed = [i, j, m]
        view.fuse(
            pool, "_FusedConv2DBiasAddReluMaxPool", attrs, inputs, absorbed, [(i, 0)],
            extra=[dtypes.uint8],
        )  # fmt: skip


def _pool_of(view, i: int) -> int | None:
    """The one MaxPool reading Relu node i that the loop may pool with it (2x2 windows at
    stride 2, NHWC, SAME or VALID, on i's device, an activation of even height and width
    when built), or None."""
    dims = view.nodes[i].op.outputs[0].shape
    if dims.ndims != 4 or any(d.value is None or d.value % 2 for d in (dims[1], dims[2])):
        return None
    found = None
    for k, _ in view.consumers(i):
        op = view.nodes[k].op
        if op.type != "MaxPool":
            continue
        if found is not None:
            return None  # two poolings of one activation: leave them be
        found = k
    if found is None or not view.available(found) or view.reads_ref(found):
        return None
    op = view.nodes[found].op
    if view.nodes[found].device is not view.nodes[i].device:
        return None
    two = [1, 2, 2, 1]
    if list(op._attr("ksize")) != two or list(op._attr("strides")) != two:
        return None
    if op._attr("data_format") != "NHWC" or op._attr("padding") not in ("SAME", "VALID"):
        return None
    return found if op._attr("T") == dtypes.float32 else None


def _direct_conv_attrs(op) -> bool:
    """Whether Conv2D `op` is of the kind cnn_jit's loop, oneDNN or the spectral path
    takes with its bias and ReLU, as far as the graph says."""
    if op._attr("T") != dtypes.float32 or op._attr("data_format") != "NHWC":
        return False
    if op._attr("padding") not in ("SAME", "VALID") or list(op._attr("strides")) != [1] * 4:
        return False
    if list(op._attr("dilations") or [1] * 4) != [1] * 4:
        return False
    dims = op.inputs[1].shape
    if dims.ndims != 4 or dims[2].value is None:
        return False
    if 0 < dims[2].value <= cnn_jit.CONV_MAX_C:
        return True
    if conv_ops._ONEDNN and op.inputs[0].shape[-1].value == dims[2].value and onednn.available():
        return True  # (oneDNN's convolution with the bias and ReLU: `_onednn_run`)
    return _FUSE_SPECTRAL and _spectral_attrs(op)


def _spectral_attrs(op) -> bool:
    """Whether Conv2D `op` (float32 NHWC, stride and dilation 1) goes spectral by its
    static sizes (the batch aside: it cancels out of the choice)."""
    x, w = op.inputs[0].shape, op.inputs[1].shape
    if x.ndims != 4 or w.ndims != 4:
        return False
    sizes = [x[1].value, x[2].value, x[3].value, *(d.value for d in w)]
    if any(d is None or d < 1 for d in sizes) or sizes[2] != sizes[5]:
        return False
    attrs = {k: op._attr(k) for k in conv_ops._CONV_ATTRS}
    try:
        g = conv_ops._Geom(attrs, [1, *sizes[:3]], sizes[3:])
    except errors.OpError:
        return False
    return conv_ops.spectral_suits(g)


# -- graph pass: MaxPoolGrad -> ReluGrad of the pooled activation --------------------------

FusedMaxPoolGradReluGrad = register_op(
    "_FusedMaxPoolGradReluGrad",
    inputs=["orig_input: T", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs=dict(get_op_def("MaxPoolGrad").attrs),
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedMaxPoolGradReluGrad")


@FusedMaxPoolGradReluGrad.kernel("CPU")
async def _fused_max_pool_grad_relu_grad(ctx, x, y, dy):
    return await max_pool_grad_relu(ctx, x, y, dy)


FusedMaxPoolGradReluGradOfArgmax = register_op(
    "_FusedMaxPoolGradReluGradOfArgmax",
    inputs=["argmax: uint8", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs={"T": FLOATING},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedMaxPoolGradReluGradOfArgmax")


@FusedMaxPoolGradReluGradOfArgmax.kernel("CPU")
async def _fused_max_pool_grad_relu_grad_of_argmax(ctx, code, y, dy):
    code, y, dy = np.asarray(code), np.asarray(y), np.asarray(dy)
    if not (code.shape == y.shape == dy.shape and y.ndim == 4):
        raise errors.InvalidArgumentError(
            None, None,
            f"Expected grad shape to be {_shape_str(y.shape)}, but got {_shape_str(dy.shape)}",
        )  # fmt: skip
    return await ctx.compute(spread_relu_by_code, code, y, dy, cost=float(4 * dy.nbytes))


# Whether a MaxPoolGrad of _FusedConv2DBiasAddReluMaxPool's outputs reads its code
# (benchmarks' A/B).
_GRAD_OF_ARGMAX = True


def fuse_max_pool_grad_relu_grad(view) -> None:
    """ReluGrad(MaxPoolGrad(x, y, dy), x): the gradient masked on the pooled tensor,
    inside the MaxPoolGrad (pooling_ops.max_pool_grad_relu)."""
    for i, node in enumerate(view.nodes):
        if node.op.type != "ReluGrad" or node.device.device_type != "CPU" or view.reads_ref(i):
            continue
        (j, out), features = node.inputs
        if j == "feed" or out != 0 or features[0] == "feed" or not view.available(i, j):
            continue
        src = view.nodes[j]
        if src.op.type != "MaxPoolGrad" or src.device is not node.device or view.reads_ref(j):
            continue
        if tuple(src.inputs[0]) != tuple(features):
            continue  # ReluGrad of some other tensor than the pool's input
        if view.sole_consumer(j) != i:
            continue
        f, out = src.inputs[0]
        if (
            _GRAD_OF_ARGMAX
            and f != "feed"
            and view.nodes[f].op.type == "_FusedConv2DBiasAddReluMaxPool"
            and (out, *src.inputs[1]) == (1, f, 0)
            and list(src.op._attr("ksize")) == list(src.op._attr("strides")) == [1, 2, 2, 1]
        ):  # the pooling's own activation and output: the code its loop wrote
            attrs = {"T": src.op._attr("T")}
            inputs = [(f, 2), (f, 0), src.inputs[2]]
            view.fuse(i, "_FusedMaxPoolGradReluGradOfArgmax", attrs, inputs, [j])
            continue
        view.fuse(i, "_FusedMaxPoolGradReluGrad", dict(src.op._attrs), list(src.inputs), [j])


# TF's nn_ops module also holds these (not `tf.nn` names): the expanded-batch conv3d and
# the deprecated Convolution class.
from asyncflow.ops.conv_pool_nd import Convolution, conv3d_v2  # noqa: E402, F401
