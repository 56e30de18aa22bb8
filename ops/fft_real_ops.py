"""Real-input FFTs over the innermost 1, 2 or 3 dims: RFFT/RFFT2D/RFFT3D and their
inverses IRFFT/IRFFT2D/IRFFT3D, as `tf.signal.rfft` and co. write them.

The transformed dims of the input are cropped to `fft_length` first (TF's kernels
refuse a shorter input: tf.signal pads it before);
RFFT keeps the fft_length[-1] // 2 + 1 non-negative frequencies of the last dim, IRFFT
reads that many (the rest of the spectrum is its Hermitian mirror).  Kernels are the
device's `xp.fft.rfftn` / `irfftn`, which crop and pad the same way.

Gradients (TF registers them for the 1-D and 2-D ops only) are the adjoints of these
linear maps, in TF's convention for complex values (FFT's gradient is IFFT times the
size): RFFT's is the real part of the inverse transform of the spectrum zero-extended to
full length, times the size; IRFFT's is RFFT of the incoming gradient over the size, with
the bins that stand for a mirrored pair counted twice.  Each is then fitted back to the
input's own sizes.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import TypeConstraint, register_op

__all__: list[str] = []

_REAL = TypeConstraint(["float32", "float64"], default="float32")
_COMPLEX = TypeConstraint(["complex64", "complex128"], default="complex64")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_fn(rank: int, inverse: bool):
    def shape_fn(op):
        x = op.inputs[0].shape.with_rank_at_least(rank)
        given = op.inputs[1].shape.with_rank(1)[0]
        if given is not None and given != rank:
            raise ValueError(f"Dimension must be {rank} but is {given}")
        lengths = ops.constant_value(op.inputs[1])
        if x.ndims is None:
            return [tensor_shape.unknown_shape()]
        if lengths is None:
            inner = [None] * rank
        else:
            inner = [int(v) for v in lengths]
            if not inverse:
                inner[-1] = inner[-1] // 2 + 1
        return [x[:-rank].concatenate(inner)]

    return shape_fn


def _real_fft_op(op_type: str, rank: int, inverse: bool):
    op_def = register_op(
        op_type,
        inputs=["input: Tcomplex" if inverse else "input: Treal", "fft_length: int32"],
        outputs=["output: Treal" if inverse else "output: Tcomplex"],
        attrs={"Treal": _REAL, "Tcomplex": _COMPLEX},
        shape_fn=_shape_fn(rank, inverse),
    )

    @op_def.kernel(host_memory=("fft_length",))
    async def _kernel(ctx, x, fft_length):
        xp = ctx.xp
        x = xp.asarray(x)
        lengths = [int(v) for v in np.asarray(getattr(fft_length, "get", lambda: fft_length)())]
        if x.ndim < rank:
            raise _invalid(f"Input must have rank of at least {rank} but got: {x.ndim}")
        if len(lengths) != rank:
            raise _invalid(f"fft_length must be length {rank} vector, got: {len(lengths)}")
        # TF's kernels crop but never pad (tf.signal pads first); IRFFT reads
        # fft_length[-1] // 2 + 1 bins of the last dim.
        needs = lengths[:-1] + [lengths[-1] // 2 + 1 if inverse else lengths[-1]]
        for axis, (dim, need) in enumerate(zip(x.shape[x.ndim - rank :], needs)):
            if dim < need:
                raise _invalid(
                    f"Input dimension {x.ndim - rank + axis} must have length of at least "
                    f"{need} but got: {dim}"
                )
        out_dtype = ctx.attrs["Treal" if inverse else "Tcomplex"].as_numpy_dtype
        inner = list(lengths)
        if not inverse:
            inner[-1] = inner[-1] // 2 + 1
        out_shape = x.shape[: x.ndim - rank] + tuple(inner)
        if any(n == 0 for n in lengths) or x.size == 0:
            return xp.zeros(out_shape, out_dtype)
        axes = tuple(range(-rank, 0))
        fn = xp.fft.irfftn if inverse else xp.fft.rfftn
        return fn(x, s=lengths, axes=axes).astype(out_dtype)

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


RFFT = _real_fft_op("RFFT", 1, False)
RFFT2D = _real_fft_op("RFFT2D", 2, False)
RFFT3D = _real_fft_op("RFFT3D", 3, False)
IRFFT = _real_fft_op("IRFFT", 1, True)
IRFFT2D = _real_fft_op("IRFFT2D", 2, True)
IRFFT3D = _real_fft_op("IRFFT3D", 3, True)


def _fit_back(grad, x, lengths, rank):
    """`grad`, the gradient of x fitted to `lengths` in its inner dims, as x's: crop
    where x was padded, zero-pad where x was cropped."""
    shape = _g.shape(x)
    lead_rank = _g.apply("Sub", _g.apply("Size", shape), _g.constant([rank]))
    inner = _g.apply("Slice", shape, lead_rank, _g.constant([rank]))
    lead = _g.apply("Slice", shape, _g.constant([0]), lead_rank)
    keep = _g.apply("Minimum", inner, lengths)
    size = _g.concat([_g.apply("Fill", _g.apply("Shape", lead), _g.constant(-1)), keep])
    begin = _g.apply("ZerosLike", size)
    grad = _g.apply("Slice", grad, begin, size)
    extra = _g.apply("Maximum", _g.apply("Sub", inner, lengths), _g.constant(0))
    after = _g.concat([_g.apply("ZerosLike", lead), extra])
    pads = _g.apply("Pack", [_g.apply("ZerosLike", after), after], axis=1)
    return _g.apply("Pad", grad, pads)


def _size(lengths, dtype):
    return _g.cast(_g.apply("Prod", lengths, _g.constant([0])), dtype)


def _last(t):
    """The last element of the 1-D int32 tensor `t`, as a 1-vector."""
    return _g.apply("Slice", t, _g.apply("Sub", _g.apply("Shape", t), 1), _g.constant([1]))


def _rfft_grad(rank, inverse_op):
    def grad_fn(op, grad):
        x, lengths = op.inputs
        # The spectrum zero-extended from n // 2 + 1 bins to n, then the full inverse.
        extend = _g.apply("Sub", _last(lengths), _last(_g.apply("Shape", grad)))
        lead = _g.apply("Sub", _g.apply("Rank", grad), 1)
        lead_pads = _g.apply("Fill", _g.apply("Pack", [lead, _g.constant(2)]), _g.constant(0))
        last_pads = _g.apply("Reshape", _g.concat([_g.constant([0]), extend]), _g.constant([1, 2]))
        full = _g.apply("Pad", grad, _g.concat([lead_pads, last_pads]))
        real = _g.apply("Real", _g.apply(inverse_op, full), Tout=x.dtype)
        dx = _g.mul(real, _size(lengths, x.dtype))
        return [_fit_back(dx, x, lengths, rank), None]

    return grad_fn


def _irfft_grad(rank, forward_op):
    def grad_fn(op, grad):
        x, lengths = op.inputs
        n = _last(lengths)
        spectrum = _g.apply(forward_op, grad, lengths, Tcomplex=x.dtype)
        # Bins 1 .. ceil(n / 2) - 1 stand for themselves and their mirror image.
        count = _g.apply("Reshape", _last(_g.apply("Shape", spectrum)), _g.constant([], "int32"))
        bins = _g.apply("Range", _g.constant(0), count, _g.constant(1))
        edge = _g.apply(
            "LogicalOr",
            _g.apply("Equal", bins, 0),
            _g.apply("Equal", _g.mul(bins, _g.constant(2)), n),
        )
        real_dtype = x.dtype.real_dtype
        weight = _g.apply("Sub", _g.constant(2.0, real_dtype), _g.cast(edge, real_dtype))
        scale = _g.apply("RealDiv", weight, _size(lengths, real_dtype))
        dx = _g.mul(spectrum, _g.cast(scale, x.dtype))
        return [_fit_back(dx, x, _fitted_lengths(lengths, rank), rank), None]

    return grad_fn


def _fitted_lengths(lengths, rank):
    """The inner sizes IRFFT reads its input at: fft_length, the last halved plus one."""
    half = _g.apply("Add", _g.apply("FloorDiv", _last(lengths), _g.constant(2)), _g.constant(1))
    head = _g.apply("Slice", lengths, _g.constant([0]), _g.constant([rank - 1]))
    return _g.concat([head, half])


RFFT.gradient(_rfft_grad(1, "IFFT"))
RFFT2D.gradient(_rfft_grad(2, "IFFT2D"))
IRFFT.gradient(_irfft_grad(1, "RFFT"))
IRFFT2D.gradient(_irfft_grad(2, "RFFT2D"))
# (TF registers no gradient for RFFT3D / IRFFT3D: tf.gradients raises LookupError)


def real_fft(op_type: str, input_tensor, fft_length, name=None):
    """Build `op_type` (RFFT, IRFFT2D, ...) on `input_tensor` with TF's dtype attrs."""
    x = ops.convert_to_tensor(input_tensor, name="input_tensor")
    lengths = ops.convert_to_tensor(fft_length, dtype=dtypes.int32, name="fft_length")
    if op_type.startswith("I"):
        attrs = {"Tcomplex": x.dtype, "Treal": x.dtype.real_dtype}
    else:
        complex_dtype = dtypes.complex128 if x.dtype == dtypes.float64 else dtypes.complex64
        attrs = {"Treal": x.dtype, "Tcomplex": complex_dtype}
    return ops.apply_op(op_type, [x, lengths], attrs, name=name).outputs[0]
