"""Discrete Fourier transforms over the innermost dimensions: FFT/IFFT, FFT2D/IFFT2D,
FFT3D/IFFT3D, and the N-d FFTND/IFFTND/RFFTND/IRFFTND (over `axes`, each padded or
cropped to `fft_length`); TF's gradients for the complex transforms and TF1 builders.

Kernels use the device's `xp.fft` (NumPy's pocketfft on the CPU), computing in the
op's complex type.  RFFTND/IRFFTND have no gradient here (NotImplementedError names
it); FFTND/IFFTND differentiate when fft_length equals the transformed sizes.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, math_ops, reduction_ops
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d", "fftnd", "ifftnd", "rfftnd",
           "irfftnd"]  # fmt: skip

_COMPLEX = TypeConstraint(["complex64", "complex128"], default="complex64")
_REAL = TypeConstraint(["float32", "float64"], default="float32")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _inner_op(op_type: str, rank: int, inverse: bool):
    def shape_fn(op):
        return [op.inputs[0].shape.with_rank_at_least(rank)]

    op_def = register_op(
        op_type,
        inputs=["input: Tcomplex"],
        outputs=["output: Tcomplex"],
        attrs={"Tcomplex": _COMPLEX},
        shape_fn=shape_fn,
    )

    @op_def.kernel()
    async def _kernel(ctx, x):
        xp = ctx.xp
        x = xp.asarray(x)
        if x.ndim < rank:
            raise _invalid(f"Input must have rank of at least {rank} but got: {x.ndim}")
        axes = tuple(range(-rank, 0))
        fn = xp.fft.ifftn if inverse else xp.fft.fftn
        out = fn(x, axes=axes) if x.size else x.copy()
        return out.astype(x.dtype)

    @op_def.gradient
    def _grad(op, grad):
        x = op.inputs[0]
        size = math_ops.cast(_inner_size(x, rank), x.dtype)
        other = op_type[1:] if inverse else "I" + op_type
        back = ops.apply_op(other, [grad]).outputs[0]
        return [back * size if not inverse else back / size]

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


def _inner_size(x, rank):
    shape = array_ops.shape(x)
    return reduction_ops.reduce_prod(shape[-rank:])


FFT = _inner_op("FFT", 1, False)
IFFT = _inner_op("IFFT", 1, True)
FFT2D = _inner_op("FFT2D", 2, False)
IFFT2D = _inner_op("IFFT2D", 2, True)
FFT3D = _inner_op("FFT3D", 3, False)
IFFT3D = _inner_op("IFFT3D", 3, True)


def _builder(op_type, doc):
    def builder(input, name=None):  # noqa: A002 - TF's name
        return ops.apply_op(op_type, [input], name=name).outputs[0]

    builder.__doc__ = doc
    return builder


fft = _builder("FFT", "The DFT over the innermost dimension of a complex tensor.")
ifft = _builder("IFFT", "The inverse DFT over the innermost dimension.")
fft2d = _builder("FFT2D", "The 2-D DFT over the innermost two dimensions.")
ifft2d = _builder("IFFT2D", "The inverse 2-D DFT over the innermost two dimensions.")
fft3d = _builder("FFT3D", "The 3-D DFT over the innermost three dimensions.")
ifft3d = _builder("IFFT3D", "The inverse 3-D DFT over the innermost three dimensions.")
for _n in ("fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d"):
    globals()[_n].__name__ = globals()[_n].__qualname__ = _n


# -- N-d ------------------------------------------------------------------------------------


def _nd_op(op_type: str, kind: str):
    ins = "input: Treal" if kind == "r" else "input: Tcomplex"
    outs = "output: Treal" if kind == "ir" else "output: Tcomplex"
    op_def = register_op(
        op_type,
        inputs=[ins, "fft_length: int32", "axes: int32"],
        outputs=[outs],
        attrs={"Treal": _REAL, "Tcomplex": _COMPLEX} if kind else {"Tcomplex": _COMPLEX},
        shape_fn=lambda op: [tensor_shape.unknown_shape(op.inputs[0].shape.ndims)],
    )

    @op_def.kernel(host_memory=("fft_length", "axes"))
    async def _kernel(ctx, x, fft_length, axes):
        xp = ctx.xp
        x = xp.asarray(x)
        lengths = [int(v) for v in np.asarray(getattr(fft_length, "get", lambda: fft_length)())]
        axes_l = [int(v) for v in np.asarray(getattr(axes, "get", lambda: axes)())]
        if len(lengths) != len(axes_l):
            raise _invalid("fft_length and axes must have the same length")
        for a in axes_l:
            if not -x.ndim <= a < x.ndim:
                raise _invalid(f"axis {a} is out of range for rank {x.ndim}")
        fn = {"": xp.fft.fftn, "i": xp.fft.ifftn, "r": xp.fft.rfftn, "ir": xp.fft.irfftn}[kind]
        out = fn(x, s=lengths, axes=axes_l)
        dtype = ctx.attrs["Treal"] if kind == "ir" else ctx.attrs["Tcomplex"]
        return out.astype(dtype.as_numpy_dtype)

    @op_def.gradient
    def _grad(op, grad):
        if kind in ("r", "ir"):
            raise NotImplementedError(f"The gradient of {op_type} is not implemented in asyncflow")
        x, lengths, axes = op.inputs
        size = math_ops.cast(reduction_ops.reduce_prod(lengths), x.dtype)
        other = "IFFTND" if kind == "" else "FFTND"
        back = ops.apply_op(other, [grad, lengths, axes]).outputs[0]
        return [back * size if kind == "" else back / size, None, None]

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


FFTND = _nd_op("FFTND", "")
IFFTND = _nd_op("IFFTND", "i")
RFFTND = _nd_op("RFFTND", "r")
IRFFTND = _nd_op("IRFFTND", "ir")


def _nd_builder(op_type, doc: str):
    def build(input, fft_length, axes, name=None, Tcomplex=None, Treal=None):  # noqa: A002,N803
        with ops.name_scope(name, op_type, [input]) as scope:
            x = ops.convert_to_tensor(input, name="input")
            lengths = ops.convert_to_tensor(fft_length, dtype=dtypes.int32, name="fft_length")
            ax = ops.convert_to_tensor(axes, dtype=dtypes.int32, name="axes")
            attrs = {}
            if op_type == "RFFTND":
                attrs["Tcomplex"] = dtypes.as_dtype(
                    Tcomplex
                    or (dtypes.complex128 if x.dtype == dtypes.float64 else dtypes.complex64)
                )
            if op_type == "IRFFTND":
                attrs["Treal"] = dtypes.as_dtype(Treal or x.dtype.real_dtype)
            return ops.apply_op(op_type, [x, lengths, ax], attrs, name=scope).outputs[0]

    # TF's argument order: the type attr (None: from the input) before the name
    if op_type == "RFFTND":

        def builder(input, fft_length, axes, Tcomplex=None, name=None):  # noqa: A002,N803
            return build(input, fft_length, axes, name, Tcomplex=Tcomplex)
    elif op_type == "IRFFTND":

        def builder(input, fft_length, axes, Treal=None, name=None):  # noqa: A002,N803
            return build(input, fft_length, axes, name, Treal=Treal)
    else:

        def builder(input, fft_length, axes, name=None):  # noqa: A002
            return build(input, fft_length, axes, name)

    builder.__doc__ = doc
    return builder


fftnd = _nd_builder("FFTND", "The DFT over `axes`, each of length fft_length[i].")
ifftnd = _nd_builder("IFFTND", "The inverse DFT over `axes` (lengths fft_length).")
rfftnd = _nd_builder("RFFTND", "The DFT of a real tensor over `axes` (half spectrum).")
irfftnd = _nd_builder("IRFFTND", "The real inverse of rfftnd over `axes`.")
for _n in ("fftnd", "ifftnd", "rfftnd", "irfftnd"):
    globals()[_n].__name__ = globals()[_n].__qualname__ = _n
