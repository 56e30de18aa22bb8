"""Moving spatial blocks between dimensions: SpaceToBatchND / BatchToSpaceND,
SpaceToDepth / DepthToSpace (each the other's gradient), and TF1's builders
(`space_to_batch(_nd)`, `batch_to_space(_nd)`, `space_to_depth`, `depth_to_space`,
`required_space_to_batch_paddings`, `nn.space_to_batch`, `nn.with_space_to_batch`).

The kernels are reshapes and transposes of the (padded) input written against the
device's array module, as TF's definitions state them: for SpaceToBatchND, input
[B, s1..sM, rest] padded to [B, p1..pM, rest] is reshaped to
[B, p1/b1, b1, ..., pM/bM, bM, rest], its block axes moved to the front and merged
into the batch: [b1*..*bM*B, p1/b1, ..., pM/bM, rest].
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, math_ops
from asyncflow.registry import ANY, INDEX, REQUIRED, register_op

__all__ = [
    "space_to_batch_nd",
    "batch_to_space_nd",
    "space_to_batch",
    "batch_to_space",
    "space_to_depth",
    "depth_to_space",
    "required_space_to_batch_paddings",
]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _host(v) -> np.ndarray:
    return np.asarray(v.get() if hasattr(v, "get") else v).astype(np.int64)


# -- SpaceToBatchND / BatchToSpaceND --------------------------------------------------------


def _unknown_blocks(x, block_shape) -> tensor_shape.TensorShape:
    """The shape when the block sizes or paddings are known only at run time: the dims
    after the M blocked ones pass through, as TF's shape function keeps them."""
    m = tensor_shape.dimension_value(block_shape.shape.with_rank(1)[0])
    if x.ndims is None or m is None or x.ndims < 1 + m:
        return tensor_shape.unknown_shape(x.ndims)
    return tensor_shape.TensorShape([None] * (1 + m) + x.as_list()[1 + m :])


def _s2b_shape(op):
    x = op.inputs[0].shape
    block = ops.constant_value(op.inputs[1])
    pads = ops.constant_value(op.inputs[2])
    if x.ndims is None or block is None or pads is None:
        return [_unknown_blocks(x, op.inputs[1])]
    dims = x.as_list()
    m = len(block)
    out = [None if dims[0] is None else dims[0] * int(np.prod(block))]
    for i in range(m):
        d = dims[1 + i]
        if d is None:
            out.append(None)
            continue
        padded = d + int(pads[i][0]) + int(pads[i][1])
        if padded % int(block[i]):
            raise ValueError(f"padded_shape[{i}]={padded} is not divisible by block_shape[{i}]="
                             f"{int(block[i])}")  # fmt: skip
        out.append(padded // int(block[i]))
    return [tensor_shape.TensorShape(out + dims[1 + m :])]


SpaceToBatchND = register_op(
    "SpaceToBatchND",
    inputs=["input: T", "block_shape: Tblock_shape", "paddings: Tpaddings"],
    outputs=["output: T"],
    attrs={"T": ANY, "Tblock_shape": INDEX, "Tpaddings": INDEX},
    shape_fn=_s2b_shape,
)


def _check_block(block, x, what: str):
    if block.ndim != 1:
        raise _invalid(f"block_shape must be one-dimensional, got {list(block.shape)}")
    if (block < 1).any():
        raise _invalid(f"All values in block_shape must be positive, got {block.tolist()}")
    if x.ndim < 1 + block.size:
        raise _invalid(f"input rank should be >= {1 + block.size} instead of {x.ndim} ({what})")


@SpaceToBatchND.kernel(host_memory=("block_shape", "paddings"))
async def _space_to_batch_nd(ctx, x, block_shape, paddings):
    xp = ctx.xp
    x = xp.asarray(x)
    block, pads = _host(block_shape), _host(paddings)
    _check_block(block, x, "SpaceToBatchND")
    m = block.size
    if pads.shape != (m, 2) or (pads < 0).any():
        raise _invalid(f"paddings must be a non-negative [{m}, 2] matrix, got {pads.tolist()}")
    width = [(0, 0)] + [tuple(p) for p in pads.tolist()] + [(0, 0)] * (x.ndim - 1 - m)
    padded = xp.pad(x, width) if pads.any() else x
    b = x.shape[0]
    spatial = padded.shape[1 : 1 + m]
    for i in range(m):
        if spatial[i] % block[i]:
            raise _invalid(f"padded_shape[{i}]={spatial[i]} is not divisible by "
                           f"block_shape[{i}]={block[i]}")  # fmt: skip
    rest = padded.shape[1 + m :]
    shape = [b]
    for i in range(m):
        shape += [spatial[i] // block[i], int(block[i])]
    y = padded.reshape(*shape, *rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    out = [b * int(np.prod(block))] + [spatial[i] // block[i] for i in range(m)] + list(rest)
    return xp.ascontiguousarray(y).reshape(out)


def _b2s_shape(op):
    x = op.inputs[0].shape
    block = ops.constant_value(op.inputs[1])
    crops = ops.constant_value(op.inputs[2])
    if x.ndims is None or block is None or crops is None:
        return [_unknown_blocks(x, op.inputs[1])]
    dims = x.as_list()
    m = len(block)
    prod = int(np.prod(block))
    if dims[0] is not None and dims[0] % prod:
        raise ValueError(f"Input batch dimension ({dims[0]}) is not divisible by the product of "
                         f"block sizes ({prod})")  # fmt: skip
    out = [None if dims[0] is None else dims[0] // prod]
    for i in range(m):
        d = dims[1 + i]
        out.append(None if d is None else d * int(block[i]) - int(crops[i][0]) - int(crops[i][1]))
    return [tensor_shape.TensorShape(out + dims[1 + m :])]


BatchToSpaceND = register_op(
    "BatchToSpaceND",
    inputs=["input: T", "block_shape: Tblock_shape", "crops: Tcrops"],
    outputs=["output: T"],
    attrs={"T": ANY, "Tblock_shape": INDEX, "Tcrops": INDEX},
    shape_fn=_b2s_shape,
)


@BatchToSpaceND.kernel(host_memory=("block_shape", "crops"))
async def _batch_to_space_nd(ctx, x, block_shape, crops):
    xp = ctx.xp
    x = xp.asarray(x)
    block, crop = _host(block_shape), _host(crops)
    _check_block(block, x, "BatchToSpaceND")
    m = block.size
    if crop.shape != (m, 2) or (crop < 0).any():
        raise _invalid(f"crops must be a non-negative [{m}, 2] matrix, got {crop.tolist()}")
    prod = int(np.prod(block))
    if x.shape[0] % prod:
        raise _invalid(f"Input batch dimension ({x.shape[0]}) is not divisible by product "
                       f"of block sizes ({prod})")  # fmt: skip
    b = x.shape[0] // prod
    spatial = x.shape[1 : 1 + m]
    rest = x.shape[1 + m :]
    y = x.reshape(*[int(v) for v in block], b, *spatial, *rest)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = xp.ascontiguousarray(y.transpose(perm))
    full = [spatial[i] * int(block[i]) for i in range(m)]
    y = y.reshape(b, *full, *rest)
    for i in range(m):
        lo, hi = int(crop[i][0]), int(crop[i][1])
        if lo + hi > full[i]:
            raise _invalid(f"Crops must not exceed the size of dimension {i + 1}")
    index = [slice(None)] + [slice(int(c[0]), full[i] - int(c[1])) for i, c in enumerate(crop)]
    return xp.ascontiguousarray(y[tuple(index)])


@SpaceToBatchND.gradient
def _s2b_grad(op, grad):
    return [
        ops.apply_op("BatchToSpaceND", [grad, op.inputs[1], op.inputs[2]]).outputs[0],
        None,
        None,
    ]


@BatchToSpaceND.gradient
def _b2s_grad(op, grad):
    return [
        ops.apply_op("SpaceToBatchND", [grad, op.inputs[1], op.inputs[2]]).outputs[0],
        None,
        None,
    ]


def space_to_batch_nd(input, block_shape, paddings, name=None):  # noqa: A002 - TF's name
    """Blocks of the M spatial dimensions after the batch moved into the batch (op
    SpaceToBatchND), the spatial dimensions first padded by `paddings` [M, 2].

    Raises:
      ValueError: a padded size not divisible by its block size (static shapes).
      InvalidArgumentError: (when run) the same, or bad block_shape / paddings.
    """
    return ops.apply_op("SpaceToBatchND", [input, block_shape, paddings], name=name).outputs[0]


def batch_to_space_nd(input, block_shape, crops, name=None):  # noqa: A002 - TF's name
    """The inverse of space_to_batch_nd, cropping `crops` [M, 2] afterwards.

    Raises:
      ValueError: a batch not divisible by the product of block sizes (static shapes).
      InvalidArgumentError: (when run) the same, or crops larger than the result.
    """
    return ops.apply_op("BatchToSpaceND", [input, block_shape, crops], name=name).outputs[0]


def _block2(block_size, block_shape):
    if block_shape is not None:
        block_size = block_shape
    if isinstance(block_size, int | np.integer):
        return [int(block_size)] * 2
    return block_size


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None):  # noqa: A002
    """TF1's 4-D space_to_batch: space_to_batch_nd with block [block_size] * 2 on NHWC."""
    with ops.name_scope(name, "SpaceToBatch", [input, paddings]) as scope:
        return space_to_batch_nd(input, _block2(block_size, block_shape), paddings, name=scope)


def batch_to_space(input, crops, block_size, name=None, block_shape=None):  # noqa: A002
    """TF1's 4-D batch_to_space: batch_to_space_nd with block [block_size] * 2 on NHWC."""
    with ops.name_scope(name, "BatchToSpace", [input, crops]) as scope:
        return batch_to_space_nd(input, _block2(block_size, block_shape), crops, name=scope)


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None, name=None):
    """(paddings, crops) [M, 2] that make input_shape + base paddings divisible by
    block_shape, the extra padding at the end, as TF computes them."""
    with ops.name_scope(name, "required_space_to_batch_paddings", [input_shape, block_shape]):
        input_shape = ops.convert_to_tensor(input_shape, dtype=dtypes.int32, name="input_shape")
        block_shape = ops.convert_to_tensor(block_shape, dtype=dtypes.int32, name="block_shape")
        m = tensor_shape.dimension_value(block_shape.shape.with_rank(1)[0])
        if base_paddings is not None:
            base = ops.convert_to_tensor(base_paddings, dtype=dtypes.int32, name="base_paddings")
        else:
            base = array_ops.zeros(array_ops.stack([array_ops.size(block_shape), 2]), dtypes.int32)
        const = [ops.constant_value(t) for t in (input_shape, block_shape, base)]
        if all(c is not None for c in const):
            # Known sizes give constants (TF folds them), so shapes stay static.
            size, block, base_np = (np.asarray(c, np.int32) for c in const)
            extra = (block - (size + base_np[:, 0] + base_np[:, 1]) % block) % block
            pads = np.stack([base_np[:, 0], base_np[:, 1] + extra], axis=1)
            crop = np.stack([np.zeros_like(extra), extra], axis=1)
            return (
                array_ops.constant(pads, name="paddings"),
                array_ops.constant(crop, name="crops"),
            )
        start, end = base[:, 0], base[:, 1]
        full = input_shape + start + end
        extra = math_ops.floormod(block_shape - math_ops.floormod(full, block_shape), block_shape)
        pad_end = end + extra
        paddings = array_ops.stack([start, pad_end], axis=1, name="paddings")
        crops = array_ops.stack([array_ops.zeros_like(extra), extra], axis=1, name="crops")
        if m is not None:
            paddings.set_shape([m, 2])
            crops.set_shape([m, 2])
        return paddings, crops


# -- SpaceToDepth / DepthToSpace -----------------------------------------------------------


def _depth_shape(to_depth: bool):
    def shape_fn(op):
        x = op.inputs[0].shape.with_rank(4)
        b = op.get_attr("block_size")
        fmt = op.get_attr("data_format")
        fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
        n, h, w, c = x.as_list() if fmt == "NHWC" else [x.as_list()[i] for i in (0, 2, 3, 1)]
        if to_depth:
            for d in (h, w):
                if d is not None and d % b:
                    raise ValueError(f"Dimension size must be evenly divisible by {b} but is {d}")
            out = [n, h and h // b, w and w // b, c and c * b * b]
        else:
            if c is not None and c % (b * b):
                raise ValueError(f"Dimension size must be evenly divisible by {b * b} but is {c}")
            out = [n, h and h * b, w and w * b, c and c // (b * b)]
        if fmt == "NCHW":
            out = [out[0], out[3], out[1], out[2]]
        return [tensor_shape.TensorShape(out)]

    return shape_fn


_DEPTH_ATTRS = {"T": ANY, "block_size": REQUIRED, "data_format": "NHWC"}
SpaceToDepth = register_op(
    "SpaceToDepth",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=dict(_DEPTH_ATTRS),
    shape_fn=_depth_shape(True),
)
DepthToSpace = register_op(
    "DepthToSpace",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=dict(_DEPTH_ATTRS),
    shape_fn=_depth_shape(False),
)


def _nhwc(xp, x, fmt):
    return x.transpose(0, 2, 3, 1) if fmt == "NCHW" else x


def _from_nhwc(xp, x, fmt):
    return xp.ascontiguousarray(x.transpose(0, 3, 1, 2) if fmt == "NCHW" else x)


@SpaceToDepth.kernel()
async def _space_to_depth(ctx, x):
    xp = ctx.xp
    b, fmt = ctx.attrs["block_size"], ctx.attrs["data_format"]
    x = _nhwc(xp, xp.asarray(x), fmt)
    n, h, w, c = x.shape
    if h % b or w % b:
        raise _invalid(f"Image width {w} and height {h} should be divisible by block_size: {b}")
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return _from_nhwc(xp, xp.ascontiguousarray(y).reshape(n, h // b, w // b, b * b * c), fmt)


@DepthToSpace.kernel()
async def _depth_to_space(ctx, x):
    xp = ctx.xp
    b, fmt = ctx.attrs["block_size"], ctx.attrs["data_format"]
    x = _nhwc(xp, xp.asarray(x), fmt)
    n, h, w, c = x.shape
    if c % (b * b):
        raise _invalid(f"Input depth dimension {c} should be divisible by: {b * b}")
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return _from_nhwc(xp, xp.ascontiguousarray(y).reshape(n, h * b, w * b, c // (b * b)), fmt)


@SpaceToDepth.gradient
def _space_to_depth_grad(op, grad):
    attrs = {"block_size": op.get_attr("block_size"), "data_format": op.get_attr("data_format")}
    return [ops.apply_op("DepthToSpace", [grad], attrs).outputs[0]]


@DepthToSpace.gradient
def _depth_to_space_grad(op, grad):
    attrs = {"block_size": op.get_attr("block_size"), "data_format": op.get_attr("data_format")}
    return [ops.apply_op("SpaceToDepth", [grad], attrs).outputs[0]]


def _depth_builder(op_type):
    def builder(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
        if int(block_size) < 2:
            raise ValueError(f"Value for attr 'block_size' of {block_size} must be at least 2")
        if data_format not in ("NHWC", "NCHW"):
            raise ValueError(f"data_format must be NHWC or NCHW, got {data_format!r}")
        attrs = {"block_size": int(block_size), "data_format": data_format}
        return ops.apply_op(op_type, [input], attrs, name=name).outputs[0]

    return builder


space_to_depth = _depth_builder("SpaceToDepth")
depth_to_space = _depth_builder("DepthToSpace")
space_to_depth.__name__ = space_to_depth.__qualname__ = "space_to_depth"
depth_to_space.__name__ = depth_to_space.__qualname__ = "depth_to_space"
space_to_depth.__doc__ = """Blocks of block_size x block_size pixels moved into depth.

Raises:
  ValueError: block_size below 2, a bad data_format, or sizes not divisible.
  InvalidArgumentError: (when run) sizes not divisible by block_size.
"""
depth_to_space.__doc__ = """The inverse of space_to_depth: depth moved into spatial blocks.

Raises:
  ValueError: block_size below 2, a bad data_format, or depth not divisible.
  InvalidArgumentError: (when run) depth not divisible by block_size**2.
"""


def _adjust(values, fill, spatial_dims):
    """Rows of `values` (one per spatial dim) placed at dims 1..max(spatial_dims), `fill`
    rows elsewhere (TF's _with_space_to_batch_adjust)."""
    rows = []
    for d in range(1, max(spatial_dims) + 1):
        if d in spatial_dims:
            rows.append(values[spatial_dims.index(d)])
        else:
            rows.append(array_ops.zeros_like(values[0]) + fill)
    return array_ops.stack(rows)


def with_space_to_batch(input, dilation_rate, padding, op, filter_shape=None,  # noqa: A002
                        spatial_dims=None, data_format=None):  # fmt: skip
    """`op(converted, num_spatial_dims, padding)` run on input with its spatial dims
    space-to-batch'ed by `dilation_rate` and the result moved back: how TF builds
    dilated (atrous) convolution and pooling from their undilated ops.

    Raises:
      ValueError: SAME padding without filter_shape, an unknown padding, or a
        dilation_rate that is not a vector.
    """
    x = ops.convert_to_tensor(input, name="input")
    rate = ops.convert_to_tensor(dilation_rate, dtype=dtypes.int32, name="dilation_rate")
    n = tensor_shape.dimension_value(rate.shape.with_rank(1)[0])
    if n is None:
        raise ValueError("rate must have known shape")
    if spatial_dims is None:
        first = 2 if data_format is not None and data_format.startswith("NC") else 1
        spatial_dims = list(range(first, first + n))
    spatial_dims = sorted(int(d) for d in spatial_dims)
    if padding == "SAME" and filter_shape is None:
        raise ValueError("filter_shape must be specified for SAME padding")
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"Invalid padding method {padding!r}")
    const_rate = ops.constant_value(rate)
    if const_rate is not None and (np.asarray(const_rate) == 1).all():
        return op(x, n, padding)
    if const_rate is not None:
        static = _static_space_to_batch(x, rate, padding, op, filter_shape, spatial_dims)
        if static is not None:
            return static
    if padding == "SAME":
        # Only the first len(rate) dims are spatial (a conv filter's shape has 4).
        fshape = ops.convert_to_tensor(filter_shape, dtype=dtypes.int32, name="filter_shape")[:n]
        dilated = fshape + (fshape - 1) * (rate - 1)
        extra = dilated - 1
        start = math_ops.floordiv(extra, 2)
        base = array_ops.stack([start, extra - start], axis=1)
    else:
        base = array_ops.zeros(array_ops.stack([n, 2]), dtypes.int32)
    in_shape = array_ops.shape(x)
    spatial = array_ops.stack([in_shape[d] for d in spatial_dims])
    paddings, crops = required_space_to_batch_paddings(spatial, rate, base)
    rows = list(range(n))
    block = _adjust([rate[i] for i in rows], 1, spatial_dims)
    pads = _adjust([paddings[i] for i in rows], 0, spatial_dims)
    crop = _adjust([crops[i] for i in rows], 0, spatial_dims)
    converted = space_to_batch_nd(x, block, pads)
    result = op(converted, n, "VALID")
    return batch_to_space_nd(result, block, crop)


def _static_space_to_batch(x, rate, padding, op, filter_shape, spatial_dims):
    """with_space_to_batch when the rate, the input's spatial sizes and (for SAME) the
    filter's shape are known: paddings and crops become constants, as TF folds them, so
    every shape stays known.  None when something is only known at run time."""
    rate_np = np.asarray(ops.constant_value(rate), np.int32)
    n = rate_np.shape[0]
    if x.shape.rank is None:
        return None
    sizes = [tensor_shape.dimension_value(x.shape[d]) for d in spatial_dims]
    if any(d is None for d in sizes):
        return None
    if padding == "SAME":
        fshape = ops.convert_to_tensor(filter_shape, dtype=dtypes.int32, name="filter_shape")
        const_f = ops.constant_value(fshape)
        if const_f is None:
            return None
        dilated = np.asarray(const_f[:n], np.int32) * rate_np - (rate_np - 1)
        start = (dilated - 1) // 2
        base = array_ops.constant(np.stack([start, dilated - 1 - start], axis=1), name="stack")
    else:
        base = np.zeros([n, 2], np.int32)
    paddings, crops = required_space_to_batch_paddings(np.asarray(sizes, np.int32), rate, base)
    paddings, crops = ops.constant_value(paddings), ops.constant_value(crops)
    block = _adjust_const(rate_np, 1, spatial_dims)
    converted = space_to_batch_nd(x, block, _adjust_const(paddings, 0, spatial_dims))
    result = op(converted, n, "VALID")
    return batch_to_space_nd(result, block, _adjust_const(crops, 0, spatial_dims))


def _adjust_const(values, fill, spatial_dims) -> np.ndarray:
    """_adjust for constants: rows for dims 1..max(spatial_dims), `fill` off the spatial
    dims."""
    values = np.asarray(values)
    out = np.full((max(spatial_dims),) + values.shape[1:], fill, values.dtype)
    for i, d in enumerate(spatial_dims):
        out[d - 1] = values[i]
    return out
