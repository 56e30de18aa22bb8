"""N-d front ends of convolution and pooling: `convolution`, `conv1d`, `pool`,
`max_pool_v2`, `avg_pool_v2` (TF's `nn_ops` functions of those names).

They add no op: 2-D work goes to Conv2D / MaxPool / AvgPool (or MaxPoolV2 when the
window is a tensor), and 1-D work is the 2-D op on an input with a unit height, as TF
builds it.  3-D work goes to Conv3D / MaxPool3D / AvgPool3D (conv3d_ops.py).
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.ops import array_ops, conv3d_ops, conv_ops, pooling_ops

__all__ = ["convolution", "conv1d", "pool", "max_pool_v2", "avg_pool_v2"]


def _rank(x, what: str) -> int:
    n = x.shape.ndims
    if n is None:
        raise ValueError(f"{what} must have a known rank")
    return n


def _seq(value, n: int, name: str, channels_first: bool) -> list[int]:
    """TF's `_get_sequence`: an int or 1, n or n + 2 ints as the n + 2 per-dimension values."""
    if value is None:
        return [1] * (n + 2)
    if isinstance(value, int):
        value = [value]
    value = [int(v) for v in value]
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise ValueError(
            f"{name} should be of length 1, {n} or {n + 2}. Received: {name}={value} of "
            f"length {len(value)}"
        )
    return [1, 1, *value] if channels_first else [1, *value, 1]


def _two_d_format(data_format, n: int) -> tuple[str, bool]:
    """(the 2-D data_format, channels_first) for an n-d data_format (None: channels last)."""
    defaults = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}
    if n not in defaults:
        raise ValueError(f"Input tensor must be of rank 3, 4 or 5 but was {n + 2}.")
    last, first = defaults[n]
    fmt = data_format or last
    if fmt not in (last, first):
        raise ValueError(f"data_format must be {last!r} or {first!r} for {n}-D input, got {fmt!r}")
    if n == 3:
        return fmt, fmt == first
    return ("NCHW" if fmt == first else "NHWC"), fmt == first


def _spatial_axis(channels_first: bool) -> int:
    """Where a 1-D input gets its unit height: NWC -> N1WC, NCW -> NC1W."""
    return 2 if channels_first else 1


def _as_2d(values: list, channels_first: bool, unit=1) -> list:
    """A 3-element per-dimension list (1-D) as the 4-element one of the unit-height 2-D op
    (`unit` for the new dimension: 1 for ksize/strides, [0, 0] for explicit padding)."""
    i = _spatial_axis(channels_first)
    return list(values[:i]) + [unit] + list(values[i:])


def _pool_nd(op_type, input, ksize, strides, padding, data_format, name):  # noqa: A002
    builder = pooling_ops.max_pool if op_type == "MaxPool" else pooling_ops.avg_pool
    if isinstance(ksize, ops.Tensor) or isinstance(strides, ops.Tensor):
        if op_type != "MaxPool":
            raise ValueError("avg_pool_v2 needs constant ksize and strides")
        fmt = data_format or "NHWC"
        attrs = {"padding": padding, "data_format": fmt}
        return ops.apply_op("MaxPoolV2", [input, ksize, strides], attrs, name=name).outputs[0]
    with ops.name_scope(name, op_type, [input]) as scope:
        input = ops.convert_to_tensor(input, name="input")  # noqa: A001
        n = _rank(input, "input") - 2
        if n == 3 and isinstance(padding, list | tuple):
            raise ValueError("Explicit padding is not supported with an input tensor of rank 5")
        fmt, first = _two_d_format(data_format, n)
        ks, st = _seq(ksize, n, "ksize", first), _seq(strides, n, "strides", first)
        if n == 3:
            op3 = conv3d_ops.max_pool3d if op_type == "MaxPool" else conv3d_ops.avg_pool3d
            return op3(input, ks, st, padding, data_format=fmt, name=scope)
        if n == 2:
            return builder(input, ks, st, padding, data_format=fmt, name=scope)
        axis = _spatial_axis(first)
        if isinstance(padding, list | tuple):  # explicit [before, after] pairs
            padding = _as_2d(padding, first, [0, 0])
        y = builder(array_ops.expand_dims(input, axis), _as_2d(ks, first), _as_2d(st, first),
                    padding, data_format=fmt)  # fmt: skip
        return array_ops.squeeze(y, [axis], name=scope)


def max_pool_v2(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """`tf.nn.max_pool_v2`: max pooling of a 3-D (NWC), 4-D (NHWC) or 5-D (NDHWC) input;
    `ksize` and `strides` are an int or 1, N or N + 2 ints, or (4-D only) int32 tensors
    (op MaxPoolV2).

    Raises:
      ValueError: an unknown rank, a bad ksize/strides length, padding or data_format.
    """
    return _pool_nd("MaxPool", input, ksize, strides, padding, data_format, name)


def avg_pool_v2(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """`tf.nn.avg_pool_v2`: average pooling of a 3-D (NWC), 4-D (NHWC) or 5-D input.

    Raises:
      ValueError: an unknown rank, a bad ksize/strides length, padding or data_format.
    """
    return _pool_nd("AvgPool", input, ksize, strides, padding, data_format, name)


def pool(input, window_shape, pooling_type, padding, dilation_rate=None, strides=None,  # noqa: A002
         name=None, data_format=None, dilations=None):  # fmt: skip
    """`tf.nn.pool`: N-d max or average pooling with a window of `window_shape`.

    Raises:
      ValueError: an unknown pooling_type, dilation with SAME padding, dilation and strides
        both above 1, or dilated pooling (not implemented here).
    """
    if dilations is not None:
        if dilation_rate is not None:
            raise ValueError("Cannot specify both 'dilation_rate' and 'dilations'.")
        dilation_rate = dilations
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"pooling_type must be 'AVG' or 'MAX'. Received: {pooling_type}")
    window_shape = [int(v) for v in window_shape]
    n = len(window_shape)
    dilation_rate = [1] * n if dilation_rate is None else [int(v) for v in dilation_rate]
    strides = [1] * n if strides is None else [int(v) for v in strides]
    if len(dilation_rate) != n or len(strides) != n:
        raise ValueError(f"dilation_rate and strides must have length {n}")
    if any(d != 1 for d in dilation_rate):
        if padding == "SAME":
            raise ValueError(
                f"pooling with 'SAME' padding is not implemented for `dilation_rate` > 1. "
                f"Received: padding={padding} and dilation_rate={dilation_rate}"
            )
        if any(s != 1 for s in strides):
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")
        raise ValueError("dilated pooling is not implemented in asyncflow yet")
    fn = max_pool_v2 if pooling_type == "MAX" else avg_pool_v2
    return fn(input, window_shape, strides, padding, data_format=data_format, name=name)


def convolution(input, filter=None, padding=None, strides=None, dilation_rate=None,  # noqa: A002
                name=None, data_format=None, filters=None, dilations=None):  # fmt: skip
    """`tf.nn.convolution`: N-d convolution of `input` [N, spatial..., C] with `filter`
    [spatial..., C, OC]; 2-D builds Conv2D, 1-D a unit-height Conv2D.

    Raises:
      ValueError: unknown ranks, input and filter ranks that differ, a bad padding,
        strides, dilation or data_format.
    """
    filter = filter if filters is None else filters  # noqa: A001
    if dilations is not None:
        if dilation_rate is not None:
            raise ValueError("Cannot specify both 'dilation_rate' and 'dilations'.")
        dilation_rate = dilations
    with ops.name_scope(name, "convolution", [input, filter]) as scope:
        input = ops.convert_to_tensor(input, name="input")  # noqa: A001
        filter = ops.convert_to_tensor(filter, name="filter")  # noqa: A001
        n = _rank(filter, "filter") - 2
        if input.shape.ndims is not None and input.shape.ndims < n + 2:
            raise ValueError(
                f"Input tensor must be of rank at least {n + 2} (filter rank {n + 2}), got "
                f"shape {input.shape}"
            )
        if input.shape.ndims is not None and input.shape.ndims > n + 2:
            # TF's expanded batch: every leading dimension before the last n + 1 is batch.
            return conv_ops.fold_batch(
                input,
                n,
                lambda x: convolution(x, filter, padding, strides, dilation_rate,
                                      data_format=data_format),  # fmt: skip
                scope,
            )
        fmt, first = _two_d_format(data_format, n)
        st = _seq(strides, n, "strides", first)
        dl = _seq(dilation_rate, n, "dilation_rate", first)
        if any(s > 1 for s in st) and any(d > 1 for d in dl):
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")
        if n == 3:
            return conv3d_ops.conv3d(input, filter, st, padding, data_format=fmt, dilations=dl,
                                     name=scope)  # fmt: skip
        if n == 2:
            return conv_ops.conv2d(input, filter, st, padding, data_format=fmt, dilations=dl,
                                   name=scope)  # fmt: skip
        axis = _spatial_axis(first)
        y = conv_ops.conv2d(
            array_ops.expand_dims(input, axis),
            array_ops.expand_dims(filter, 0),
            _as_2d(st, first),
            padding,
            data_format=fmt,
            dilations=_as_2d(dl, first),
        )
        return array_ops.squeeze(y, [axis], name=scope)


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format=None, name=None, input=None, dilations=None):  # noqa: A002  # fmt: skip
    """`tf.nn.conv1d`: a 3-D `value` [N, W, C] (NWC; or NCW) convolved with `filters`
    [KW, C, OC], as a unit-height Conv2D.

    Raises:
      ValueError: both value and input, or a bad stride, padding or data_format.
    """
    del use_cudnn_on_gpu
    if input is not None:
        if value is not None:
            raise ValueError("Cannot specify both 'value' and 'input'.")
        value = input
    if data_format not in (None, "NWC", "NCW", "NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NWC' or 'NCW'. Received: {data_format}")
    fmt = {"NHWC": "NWC", "NCHW": "NCW"}.get(data_format, data_format)
    return convolution(value, filters, padding, strides=stride, dilation_rate=dilations,
                       name=name or "conv1d", data_format=fmt)  # fmt: skip


def conv3d_v2(input, filters, strides, padding, data_format="NDHWC", dilations=None,  # noqa: A002
              name=None):  # fmt: skip
    """TF's `nn_ops.conv3d_v2` (TF2's `tf.nn.conv3d`): Conv3D of an input whose leading
    dimensions before the last four are all batch."""
    if dilations is None:
        dilations = [1, 1, 1, 1, 1]
    with ops.name_scope(name, "Conv3D", [input, filters]) as scope:
        input = ops.convert_to_tensor(input, name="input")  # noqa: A001
        return conv_ops.fold_batch(
            input,
            3,
            lambda x: conv3d_ops.conv3d(x, filters, strides, padding, data_format=data_format,
                                        dilations=dilations),  # fmt: skip
            scope,
        )


class Convolution:
    """TF's `nn_ops.Convolution` (deprecated): a convolution set up once for an input
    and filter shape, then called on tensors; `num_batch_dims` counts the input's
    leading batch dimensions."""

    def __init__(self, input_shape, filter_shape, padding, strides=None, dilation_rate=None,
                 name=None, data_format=None, num_spatial_dims=None):  # fmt: skip
        from asyncflow import tensor_shape

        input_shape = tensor_shape.as_shape(input_shape)
        filter_shape = tensor_shape.as_shape(filter_shape)
        n = num_spatial_dims
        if n is None:
            if filter_shape.ndims is None:
                raise ValueError("filter_shape must have a known rank or num_spatial_dims")
            n = filter_shape.ndims - 2
        if input_shape.ndims is None:
            raise ValueError("input_shape must have a known rank")
        self.input_shape, self.filter_shape = input_shape, filter_shape
        self.num_spatial_dims = n
        self.num_batch_dims = input_shape.ndims - n - 1
        if self.num_batch_dims < 1:
            raise ValueError(
                f"Input tensor must be of rank at least {n + 2}, got shape {input_shape}"
            )
        self.padding, self.strides, self.dilation_rate = padding, strides, dilation_rate
        self.name, self.data_format = name, data_format

    def __call__(self, inp, filter):  # noqa: A002 - TF's name
        return convolution(inp, filter, self.padding, self.strides, self.dilation_rate,
                           name=self.name, data_format=self.data_format)  # fmt: skip
