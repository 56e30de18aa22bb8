"""SDCA's helper ops: SdcaFprint (a 128-bit fingerprint of each string, the feature ids
of `tf.train.sdca_optimizer`).

SdcaFprint is TF's `Fingerprint128` (FarmHash's `farmhashcc::Fingerprint128`, i.e.
CityHash128), written here from its published definition on unsigned 64-bit arithmetic
and checked against TF 2.21's outputs for every length 0..300
(tests/ops/test_sdca_ops.py).  Output row i is (low 64 bits, high 64 bits) as int64, the
order TF's kernel writes.
"""

from __future__ import annotations

import numpy as np

from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow.ops.string_hash_ops import _f64, _hash16, _len0to16, _rotr, _shift_mix, _weak32
from asyncflow.registry import NotDifferentiable, register_op

__all__ = ["sdca_fprint"]

_M = (1 << 64) - 1
_K0, _K1 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273
_KMUL = 0x9DDFEA08EB382D69


def _h16(u: int, v: int) -> int:
    """CityHash's HashLen16(u, v) (Hash128to64)."""
    return _hash16(u, v, _KMUL)


def _city_murmur(s: bytes, start: int, n: int, lo: int, hi: int) -> tuple[int, int]:
    a, b, c, d = lo, hi, 0, 0
    if n <= 16:
        a = (_shift_mix((a * _K1) & _M) * _K1) & _M
        c = (b * _K1 + _len0to16(s[start : start + n], n)) & _M
        d = _shift_mix((a + (_f64(s, start) if n >= 8 else c)) & _M)
    else:
        c = _h16((_f64(s, start + n - 8) + _K1) & _M, a)
        d = _h16((b + n) & _M, (c + _f64(s, start + n - 16)) & _M)
        a = (a + d) & _M
        i, left = start, n - 16
        while True:
            a ^= (_shift_mix((_f64(s, i) * _K1) & _M) * _K1) & _M
            a = (a * _K1) & _M
            b ^= a
            c ^= (_shift_mix((_f64(s, i + 8) * _K1) & _M) * _K1) & _M
            c = (c * _K1) & _M
            d ^= c
            i += 16
            left -= 16
            if left <= 0:
                break
    a = _h16(a, c)
    b = _h16(d, b)
    return a ^ b, _h16(b, a)


def _city128_seed(s: bytes, start: int, n: int, lo: int, hi: int) -> tuple[int, int]:
    if n < 128:
        return _city_murmur(s, start, n, lo, hi)
    x, y, z = lo, hi, (n * _K1) & _M
    v0 = (_rotr(y ^ _K1, 49) * _K1 + _f64(s, start)) & _M
    v1 = (_rotr(v0, 42) * _K1 + _f64(s, start + 8)) & _M
    w0 = (_rotr((y + z) & _M, 35) * _K1 + x) & _M
    w1 = (_rotr((x + _f64(s, start + 88)) & _M, 53) * _K1) & _M
    i = start
    while True:
        for _ in range(2):
            x = (_rotr((x + y + v0 + _f64(s, i + 8)) & _M, 37) * _K1) & _M
            y = (_rotr((y + v1 + _f64(s, i + 48)) & _M, 42) * _K1) & _M
            x ^= w1
            y = (y + v0 + _f64(s, i + 40)) & _M
            z = (_rotr((z + w0) & _M, 33) * _K1) & _M
            v0, v1 = _weak32(s, i, (v1 * _K1) & _M, (x + w0) & _M)
            w0, w1 = _weak32(s, i + 32, (z + w1) & _M, (y + _f64(s, i + 16)) & _M)
            z, x = x, z
            i += 64
        n -= 128
        if n < 128:
            break
    x = (x + _rotr((v0 + z) & _M, 49) * _K0) & _M
    y = (y * _K0 + _rotr(w1, 37)) & _M
    z = (z * _K0 + _rotr(w0, 27)) & _M
    w0 = (w0 * 9) & _M
    v0 = (v0 * _K0) & _M
    done = 0
    while done < n:
        done += 32
        y = (_rotr((x + y) & _M, 42) * _K0 + v1) & _M
        w0 = (w0 + _f64(s, i + n - done + 16)) & _M
        x = (x * _K0 + w0) & _M
        z = (z + w1 + _f64(s, i + n - done)) & _M
        w1 = (w1 + v0) & _M
        v0, v1 = _weak32(s, i + n - done, (v0 + z) & _M, v1)
        v0 = (v0 * _K0) & _M
    x = _h16(x, v0)
    y = _h16((y + z) & _M, w0)
    return (_h16((x + v1) & _M, w1) + y) & _M, _h16((x + w1) & _M, (y + v1) & _M)


def fingerprint128(s: bytes) -> tuple[int, int]:
    """(low64, high64) of FarmHash's Fingerprint128 (CityHash128) of `s`."""
    n = len(s)
    if n >= 16:
        return _city128_seed(s, 16, n - 16, _f64(s, 0), (_f64(s, 8) + _K0) & _M)
    return _city128_seed(s, 0, n, _K0, _K1)


def _fprints(values) -> np.ndarray:
    flat = np.asarray(values, dtype=object).reshape(-1)
    out = np.empty((flat.size, 2), np.uint64)
    for i, v in enumerate(flat):
        lo, hi = fingerprint128(v if isinstance(v, bytes) else str(v).encode())
        out[i, 0], out[i, 1] = lo, hi
    return out.view(np.int64)


def _fprint_shape(op):
    shape = op.inputs[0].shape
    if shape.ndims is not None and shape.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {shape.ndims}")
    return [tensor_shape.TensorShape([shape[0] if shape.ndims else None, 2])]


SdcaFprint = register_op(
    "SdcaFprint",
    inputs=["input: string"],
    outputs=["output: int64"],
    attrs={},
    shape_fn=_fprint_shape,
)
NotDifferentiable("SdcaFprint")


@SdcaFprint.kernel("CPU")
async def _sdca_fprint(ctx, x):
    return await ctx.compute(_fprints, x)


def sdca_fprint(input, name=None):  # noqa: A002 - TF's argument name
    """`tf.train.sdca_fprint`: each string's 128-bit fingerprint as two int64s (op
    SdcaFprint; input a 1-D string tensor, output [N, 2])."""
    return ops.apply_op("SdcaFprint", [input], {}, name=name).outputs[0]
