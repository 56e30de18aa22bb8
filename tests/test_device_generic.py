"""Generic kernels never touch host-only code with device inputs.

Each case builds a graph (forward ops and their gradients), then runs every op of it
through its generic kernel on a pretend device whose arrays refuse any implicit
conversion to NumPy (tests/strict_xp.py): `np.asarray`, `float()`, `.tolist()`, a
Python loop over values or a NumPy function on a device array raises.  Values move
between memories as the partitioner moves them: feeds and Const values start in host
memory, a device input gets a copy of a host value, a host-memory input (shape and axis
arguments, declared with `host_memory=`) gets a host copy of a device value.  Each
output must be in the memory its registration declares, and every fetched result must
equal the same graph run by a CPU Session.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import strict_xp

import asyncflow as af
from asyncflow.devices.base import Device
from asyncflow.kernel_api import KernelContext

DEVICE_TYPE = "STRICT_TEST"


class StrictDevice(Device):
    """A device whose arrays are StrictArrays; work runs inline."""

    device_type = DEVICE_TYPE
    xp = strict_xp.xp
    host_memory = False
    run_mode = "inline"

    async def compute(self, fn, *args, cost=None):
        return fn(*args)

    async def copy_to_host(self, value):
        return strict_xp.to_numpy(value)

    async def copy_from_host(self, value):
        return strict_xp.asarray(value)


def _to_device(value):
    if strict_xp.is_strict(value) or value is None:
        return value
    value = np.asarray(value)
    assert value.dtype != object, "strings never live in device memory"
    return strict_xp.asarray(value)


def _to_host(value):
    return strict_xp.to_numpy(value) if strict_xp.is_strict(value) else value


async def _interpret(graph, fetches, feeds):
    """Run every op of `graph` (in creation order: topological) on a StrictDevice."""
    device = StrictDevice("/job:localhost/replica:0/task:0/device:STRICT_TEST:0")
    values: dict = {}
    fed = {t.op for t in feeds}
    for t, v in feeds.items():
        values[t] = np.asarray(v)  # feeds arrive in host memory
    for op in graph.get_operations():
        if op in fed:
            continue
        kd = op.op_def.kernel_for(DEVICE_TYPE)
        assert kd is not None and kd.device_type is None, f"{op.type} has no generic kernel"
        host_in, host_out = op.op_def.host_memory_positions(op._attrs, DEVICE_TYPE)
        args = []
        for k, t in enumerate(op.inputs):
            v = values[t]
            args.append(_to_host(v) if k in host_in else _to_device(v))
        ctx = KernelContext(op, device, None, {})
        out = await kd.fn(ctx, *args)
        outs = list(op.outputs)
        if not outs:
            continue
        results = [out] if len(outs) == 1 else list(out)
        assert len(results) == len(outs), op.type
        for k, (t, v) in enumerate(zip(outs, results, strict=True)):
            if k in host_out:
                assert not strict_xp.is_strict(v), f"{op.type} output {k} should be in host memory"
            else:
                assert strict_xp.is_strict(v), (
                    f"{op.type} output {k} is a {type(v).__name__}, not a device array"
                )
            values[t] = v
    return [_to_host(values[t]) for t in fetches]


# Each case: name -> build() returning (fetches, {placeholder: value}).  Gradients come
# from af.gradients, so their kernels (ReluGrad, BiasAddGrad, Conv2DBackprop*, Tile,
# BroadcastGradientArgs, Sum over host axes, ...) run too.
_RNG = np.random.default_rng(7)


def _f32(*shape):
    return _RNG.standard_normal(shape).astype(np.float32)


def _feed(value, name="x"):
    return af.placeholder(af.as_dtype(value.dtype), value.shape, name=name)


def _with_grads(loss, wrt):
    return [loss, *af.gradients(loss, wrt)]


def _elementwise():
    xv, yv = _f32(3, 4), np.abs(_f32(3, 4)) + 0.5
    x, y = _feed(xv, "x"), _feed(yv, "y")
    z = (
        af.exp(x) * y
        + af.log(y)
        - af.tanh(x) / y
        + af.sigmoid(x)
        + af.sqrt(y)
        + af.square(x)
        + af.maximum(x, y)
        - af.minimum(x, 0.0)
        + af.pow(y, 1.5)
        + af.squared_difference(x, y)
        + af.rsqrt(y)
        + af.abs(x)
        + af.sign(x)
        + af.reciprocal(y)
        + af.floor(x)
        + af.round(x)
    )
    loss = af.reduce_sum(z)
    return _with_grads(loss, [x, y]), {x: xv, y: yv}


def _broadcast_and_compare():
    xv, yv = _f32(2, 3, 4), _f32(4)
    x, y = _feed(xv, "x"), _feed(yv, "y")
    s = x + y
    out = [
        s,
        af.cast(x > y, af.float32),
        af.where(x < y, x, af.zeros_like(x)),
        af.logical_and(x > 0, y > 0),
        af.equal(x, x),
        af.add_n([x, x, x]),
    ]
    return out + af.gradients(af.reduce_sum(s * s), [x, y]), {x: xv, y: yv}


def _integer_math():
    xv = np.array([[7, -7, 3], [9, -4, 0]], np.int32)
    yv = np.array([2, 3, -2], np.int32)
    x, y = _feed(xv, "x"), _feed(yv, "y")
    return [af.floordiv(x, y), af.floormod(x, y), x * y - y, af.div(x, y)], {x: xv, y: yv}


def _matmul_mlp():
    xv, wv, bv = _f32(5, 4), _f32(4, 3), _f32(3)
    x, w, b = _feed(xv, "x"), _feed(wv, "w"), _feed(bv, "b")
    h = af.nn.relu(af.nn.bias_add(af.matmul(x, w), b))
    h2 = af.matmul(h, w, transpose_b=True)
    labels = np.array([0, 2, 1, 1, 0], np.int32)
    loss = af.reduce_mean(
        af.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h)
    ) + af.reduce_sum(h2)
    return _with_grads(loss, [x, w, b]), {x: xv, w: wv, b: bv}


def _softmax_family():
    xv, lv = _f32(4, 5), np.abs(_f32(4, 5))
    lv = lv / lv.sum(axis=1, keepdims=True)
    x = _feed(xv)
    out = [
        af.nn.softmax(x),
        af.nn.log_softmax(x),
        af.nn.softmax_cross_entropy_with_logits(labels=lv, logits=x),
        af.nn.relu6(x),
        af.nn.elu(x),
        af.nn.softplus(x),
        af.nn.softsign(x),
        af.nn.l2_loss(x),
    ]
    loss = af.add_n([af.reduce_sum(t) for t in out])
    return out + af.gradients(loss, [x]), {x: xv}


def _reductions():
    xv = _f32(3, 4, 5)
    x = _feed(xv)
    out = [
        af.reduce_sum(x, axis=1),
        af.reduce_mean(x, axis=[0, 2], keepdims=True),
        af.reduce_max(x, axis=-1),
        af.reduce_min(x),
        af.reduce_prod(x, axis=0),
        af.reduce_any(x > 1.0, axis=1),
        af.reduce_all(x > -3.0),
        af.argmax(x, axis=2),
        af.argmin(x, axis=0),
        af.cumsum(x, axis=1, exclusive=True),
        af.cumprod(x, axis=2, reverse=True),
    ]
    loss = af.reduce_sum(out[0]) + af.reduce_sum(out[1]) + af.reduce_sum(out[2])
    return out + af.gradients(loss + af.reduce_sum(out[9]), [x]), {x: xv}


def _shapes_and_layout():
    xv = _f32(2, 3, 4)
    x = _feed(xv)
    y = af.reshape(af.transpose(x, [2, 0, 1]), [4, -1])
    parts = af.split(y, 2, axis=0)
    sizes = af.split(y, [1, 3], axis=0)
    z = af.concat([y, y * 2.0], axis=1)
    stacked = af.stack([x, x + 1.0], axis=1)
    un = af.unstack(x, axis=1)
    out = [
        y,
        *parts,
        *sizes,
        z,
        stacked,
        *un,
        af.expand_dims(x, 1),
        af.squeeze(af.expand_dims(x, 0)),
        af.tile(x, [1, 2, 1]),
        af.pad(x, [[0, 1], [2, 0], [1, 1]]),
        af.pad(x, [[1, 1], [1, 1], [0, 0]], mode="REFLECT"),
        af.pad(x, [[0, 0], [1, 2], [0, 0]], mode="SYMMETRIC"),
        af.reverse(x, [0, 2]),
        af.shape(x),
        af.size(x),
        af.rank(x),
        af.shape_n([x, y]),
        x[1, ::2, 1:],
        af.slice(x, [0, 1, 0], [2, 2, -1]),
        af.gather(x, [2, 0, 2], axis=1),
        af.one_hot([0, 2, 1], 3),
        af.fill(af.shape(y), 2.5),
        af.ones_like(x),
        af.range(2, 11, 3),
        af.raw_ops.LinSpace(start=0.0, stop=1.0, num=5),  # (af.linspace builds TF 2.21's graph)
        af.where(x > 0),
        af.identity_n([x, y]),
    ]
    out = [t for group in out for t in (group if isinstance(group, list) else [group])]
    loss = (
        af.reduce_sum(z * z)
        + af.reduce_sum(stacked)
        + af.reduce_sum(af.tile(x, [1, 2, 1]))
        + af.reduce_sum(af.pad(x, [[1, 1], [1, 1], [0, 0]], mode="REFLECT"))
        + af.reduce_sum(x[1, ::2, 1:] * 3.0)
        + af.reduce_sum(af.gather(x, [2, 0, 2], axis=1))
        + af.reduce_sum(af.slice(x, [0, 1, 0], [2, 2, -1]))
        + af.add_n([af.reduce_sum(u) for u in un])
        + af.reduce_sum(parts[1])
    )
    return out + af.gradients(loss, [x]), {x: xv}


def _dynamic_shapes():
    """Unknown static shapes: the gradients compute shapes at run time (Shape,
    BroadcastGradientArgs, Reshape, Sum over host axes)."""
    xv, yv = _f32(3, 4), _f32(4)
    x = af.placeholder(af.float32, [None, None], name="x")
    y = af.placeholder(af.float32, None, name="y")
    z = x * y + y
    m = af.reduce_mean(z, axis=0)
    out = [z, m, af.size(x), af.rank(y), af.shape(z), af.reshape(x, af.shape(x)[::-1])]
    return out + af.gradients(af.reduce_sum(m * m), [x, y]), {x: xv, y: yv}


def _conv_pool():
    xv, wv, dv = _f32(2, 8, 8, 3), _f32(3, 3, 3, 4), _f32(2, 2, 3, 1)
    x, w, d = _feed(xv, "x"), _feed(wv, "w"), _feed(dv, "d")
    y = af.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
    y = af.nn.relu(y)
    p = af.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    a = af.nn.avg_pool(y, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
    dw = af.nn.depthwise_conv2d(x, d, [1, 1, 1, 1], "VALID")
    loss = af.reduce_sum(p * p) + af.reduce_sum(a) + af.reduce_sum(dw * dw)
    return [y, p, a, dw, *af.gradients(loss, [x, w, d])], {x: xv, w: wv, d: dv}


def _batch_norm_and_topk():
    xv, sv, ov = _f32(2, 3, 3, 4), np.abs(_f32(4)) + 0.5, _f32(4)
    x, s, o = _feed(xv, "x"), _feed(sv, "s"), _feed(ov, "o")
    y, mean, var = af.nn.fused_batch_norm(x, s, o)
    loss = af.reduce_sum(y * y)
    pv = _f32(4, 6)
    p = _feed(pv, "p")
    values, indices = af.nn.top_k(p, k=3)
    hit = af.nn.in_top_k(p, [0, 5, 2, 1], 2)
    grads = af.gradients(loss + af.reduce_sum(values), [x, s, o, p])
    return [y, mean, var, values, indices, hit, *grads], {x: xv, s: sv, o: ov, p: pv}


def _batch_matmul_and_segments():
    av, bv = _f32(2, 3, 4), _f32(2, 4, 5)
    a, b = _feed(av, "a"), _feed(bv, "b")
    c = af.matmul(a, b)
    seg = af.unsorted_segment_sum(a, [1, 0], 3)
    loss = af.reduce_sum(c * c) + af.reduce_sum(seg)
    return [c, seg, *af.gradients(loss, [a, b])], {a: av, b: bv}


def _nd_indexing():
    pv, uv = _f32(4, 3, 2), _f32(2, 2)
    p, u = _feed(pv, "p"), _feed(uv, "u")
    idx = np.array([[1, 2], [3, 0]], np.int32)
    g = af.gather_nd(p, idx)
    s = af.scatter_nd(idx, u, [4, 3, 2])
    t = af.tensor_scatter_nd_add(p, idx, u)
    t2 = af.tensor_scatter_nd_update(p, idx, u)
    loss = af.reduce_sum(g * g) + af.reduce_sum(s * s) + af.reduce_sum(t) + af.reduce_sum(t2)
    sv = np.sort(_f32(3, 5), axis=1)
    sq = _feed(sv, "sorted")
    bounds = [af.searchsorted(sq, sq * 0.5, side=side) for side in ("left", "right")]
    parts = af.dynamic_partition(p, [1, 0, 1, 2], 3)
    stitched = af.dynamic_stitch([[0, 2], [1, 3]], [u, u * 2.0])
    loss = loss + af.add_n([af.reduce_sum(x * x) for x in parts]) + af.reduce_sum(stitched)
    out = [g, s, t, t2, *bounds, *parts, stitched]
    return out + af.gradients(loss, [p, u]), {p: pv, u: uv, sq: sv}


CASES = {
    "elementwise": _elementwise,
    "broadcast_and_compare": _broadcast_and_compare,
    "integer_math": _integer_math,
    "matmul_mlp": _matmul_mlp,
    "softmax_family": _softmax_family,
    "reductions": _reductions,
    "shapes_and_layout": _shapes_and_layout,
    "conv_pool": _conv_pool,
    "dynamic_shapes": _dynamic_shapes,
    "nd_indexing": _nd_indexing,
    "batch_norm_and_topk": _batch_norm_and_topk,
    "batch_matmul_and_segments": _batch_matmul_and_segments,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generic_kernels_on_strict_arrays_match_cpu(case, monkeypatch):
    from asyncflow.ops import conv_ops

    # The CPU's convolutions by the same methods as the generic kernels (oneDNN's
    # summation order differs in float32's last bits; tests/ops/test_conv_fast_paths.py
    # checks it against float64)
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)
    graph = af.Graph()
    with graph.as_default():
        fetches, feeds = CASES[case]()
        fetches = [t for t in fetches if t is not None]
    with af.Session(graph=graph) as sess:
        want = sess.run(fetches, feeds)
    got = asyncio.run(_interpret(graph, fetches, feeds))
    for t, g, w in zip(fetches, got, want, strict=True):
        w = np.asarray(w)
        assert g.dtype == w.dtype, t.name
        assert g.shape == w.shape, t.name
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=t.name)


def test_the_table_covers_the_generic_kernels_that_matter():
    """The cases above exercise at least these op types (forward and gradient)."""
    seen = set()
    for build in CASES.values():
        graph = af.Graph()
        with graph.as_default():
            build()
        seen |= {op.type for op in graph.get_operations()}
    wanted = {
        "MatMul", "BatchMatMulV2", "BiasAdd", "BiasAddGrad", "Relu", "ReluGrad", "Softmax",
        "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits",
        "Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "Reshape", "Transpose", "ConcatV2",
        "Pack", "Unpack", "Split", "SplitV", "Tile", "Pad", "MirrorPad", "MirrorPadGrad",
        "StridedSlice", "StridedSliceGrad", "Slice", "GatherV2", "UnsortedSegmentSum",
        "BroadcastGradientArgs", "Shape", "Size", "Rank", "Fill", "Conv2D",
        "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad", "AvgPool",
        "AvgPoolGrad", "DepthwiseConv2dNative", "FusedBatchNormV3", "FusedBatchNormGradV3",
        "TopKV2", "InTopKV2", "Cumsum", "Cumprod", "OneHot", "Where", "Select", "Range",
        "LinSpace", "ExpandDims", "Squeeze", "ReverseV2", "Exp", "Log", "Tanh", "Sigmoid",
        "AddN", "Cast", "FloorDiv", "FloorMod", "L2Loss", "GatherNd", "ScatterNd",
        "TensorScatterAdd", "TensorScatterUpdate", "LowerBound", "UpperBound",
        "DynamicPartition", "DynamicStitch",
    }  # fmt: skip
    assert wanted <= seen, sorted(wanted - seen)


# -- the strict module itself -------------------------------------------------------------


def test_strict_arrays_refuse_implicit_host_conversion():
    xp = strict_xp.xp
    y = xp.exp(strict_xp.asarray(np.arange(6.0).reshape(2, 3))) * 2
    for convert in (
        np.asarray,
        lambda a: float(a[0, 0]),
        lambda a: int(a[0, 0]),
        lambda a: range(3)[a[0, 0]],
        list,
        lambda a: a.tolist(),
        lambda a: a.item(),
        lambda a: bool(a[0, 0] > 1),
        lambda a: np.add(a, 1),
        lambda a: np.concatenate([a, a]),
        lambda a: a + np.ones(3),
    ):
        with pytest.raises(TypeError):
            convert(y)


def test_strict_namespace_wraps_and_unwraps():
    xp = strict_xp.xp
    x = strict_xp.asarray(np.arange(12.0).reshape(3, 4))
    s = xp.sum(x, axis=0)
    assert strict_xp.is_strict(s) and s.shape == (4,)
    np.testing.assert_array_equal(strict_xp.to_numpy(s), np.arange(12.0).reshape(3, 4).sum(0))
    assert xp.float32 is np.float32 and xp.newaxis is None
    out = xp.zeros(3)
    xp.add.at(out, strict_xp.asarray([0, 0, 2]), 1.0)
    np.testing.assert_array_equal(xp.asnumpy(out), [2.0, 0.0, 1.0])
    parts = xp.split(x, 2, axis=1)
    assert all(strict_xp.is_strict(p) for p in parts)
    small = strict_xp.StrictNamespace(allowed={"add"})
    with pytest.raises(AttributeError):
        small.exp  # noqa: B018 - not offered by this namespace
