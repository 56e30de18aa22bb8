"""TF's string hash ops: StringToHashBucketFast (FarmHash's Fingerprint64),
StringToHashBucketStrong (SipHash-2-4 under a 128-bit key) and StringToHashBucket
(TF's own 64-bit hash, seed 0xDECAFCAFFE), each hash modulo `num_buckets`.

Feature columns hash categorical strings with the fast one
(`categorical_column_with_hash_bucket`), so the bucket a string lands in must be the
very bucket TF computes: the three hashes are written here from their published
definitions (FarmHash's `farmhashna::Hash64`, SipHash-2-4, MurmurHash64A) on unsigned
64-bit arithmetic, and checked against TF 2.21's buckets for every length 0..199 and
longer strings (tests/ops/test_string_hash_ops.py).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.registry import REQUIRED, NotDifferentiable, register_op

__all__ = ["string_to_hash_bucket_fast", "string_to_hash_bucket_strong", "string_to_hash_bucket"]

_M = (1 << 64) - 1
_K0, _K1, _K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F


def _f64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 8], "little")


def _f32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 4], "little")


def _rotr(v: int, k: int) -> int:
    return v if k == 0 else ((v >> k) | (v << (64 - k))) & _M


def _rotl(v: int, k: int) -> int:
    return ((v << k) | (v >> (64 - k))) & _M


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _hash16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M
    b ^= b >> 47
    return (b * mul) & _M


def _len0to16(s: bytes, n: int) -> int:
    if n >= 8:
        mul = _K2 + n * 2
        a = (_f64(s, 0) + _K2) & _M
        b = _f64(s, n - 8)
        c = (_rotr(b, 37) * mul + a) & _M
        d = ((_rotr(a, 25) + b) * mul) & _M
        return _hash16(c, d, mul)
    if n >= 4:
        return _hash16(n + (_f32(s, 0) << 3), _f32(s, n - 4), _K2 + n * 2)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M) * _K2) & _M
    return _K2


def _len17to32(s: bytes, n: int) -> int:
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K1) & _M
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M
    d = (_f64(s, n - 16) * _K2) & _M
    return _hash16(
        (_rotr((a + b) & _M, 43) + _rotr(c, 30) + d) & _M,
        (a + _rotr((b + _K2) & _M, 18) + c) & _M,
        mul,
    )


def _len33to64(s: bytes, n: int) -> int:
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K2) & _M
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M
    d = (_f64(s, n - 16) * _K2) & _M
    y = (_rotr((a + b) & _M, 43) + _rotr(c, 30) + d) & _M
    z = _hash16(y, (a + _rotr((b + _K2) & _M, 18) + c) & _M, mul)
    e = (_f64(s, 16) * mul) & _M
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M
    h = ((z + _f64(s, n - 24)) * mul) & _M
    return _hash16(
        (_rotr((e + f) & _M, 43) + _rotr(g, 30) + h) & _M,
        (e + _rotr((f + a) & _M, 18) + g) & _M,
        mul,
    )


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M
    b = _rotr((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rotr(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def fingerprint64(s: bytes) -> int:
    """FarmHash's Fingerprint64 (`farmhashna::Hash64`) of `s`, as TF's `Fingerprint64`."""
    n = len(s)
    if n <= 16:
        return _len0to16(s, n)
    if n <= 32:
        return _len17to32(s, n)
    if n <= 64:
        return _len33to64(s, n)
    seed = 81
    y = (seed * _K1 + 113) & _M
    z = (_shift_mix((y * _K2 + 113) & _M) * _K2) & _M
    v0 = v1 = w0 = w1 = 0
    x = (seed * _K2 + _f64(s, 0)) & _M
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rotr((x + y + v0 + _f64(s, i + 8)) & _M, 37) * _K1) & _M
        y = (_rotr((y + v1 + _f64(s, i + 48)) & _M, 42) * _K1) & _M
        x ^= w1
        y = (y + v0 + _f64(s, i + 40)) & _M
        z = (_rotr((z + w0) & _M, 33) * _K1) & _M
        v0, v1 = _weak32(s, i, (v1 * _K1) & _M, (x + w0) & _M)
        w0, w1 = _weak32(s, i + 32, (z + w1) & _M, (y + _f64(s, i + 16)) & _M)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    i = last64
    w0 = (w0 + ((n - 1) & 63)) & _M
    v0 = (v0 + w0) & _M
    w0 = (w0 + v0) & _M
    x = (_rotr((x + y + v0 + _f64(s, i + 8)) & _M, 37) * mul) & _M
    y = (_rotr((y + v1 + _f64(s, i + 48)) & _M, 42) * mul) & _M
    x ^= (w1 * 9) & _M
    y = (y + v0 * 9 + _f64(s, i + 40)) & _M
    z = (_rotr((z + w0) & _M, 33) * mul) & _M
    v0, v1 = _weak32(s, i, (v1 * mul) & _M, (x + w0) & _M)
    w0, w1 = _weak32(s, i + 32, (z + w1) & _M, (y + _f64(s, i + 16)) & _M)
    z, x = x, z
    return _hash16(
        (_hash16(v0, w0, mul) + _shift_mix(y) * _K0 + z) & _M,
        (_hash16(v1, w1, mul) + x) & _M,
        mul,
    )


def _sip_rounds(v0: int, v1: int, v2: int, v3: int, rounds: int):
    for _ in range(rounds):
        v0 = (v0 + v1) & _M
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _M
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _M
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _M
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(k0: int, k1: int, s: bytes) -> int:
    """SipHash-2-4 of `s` under the key (k0, k1), as TF's `StrongKeyedHash`."""
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573
    n = len(s)
    end = n - n % 8
    for i in range(0, end, 8):
        m = _f64(s, i)
        v3 ^= m
        v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    b = ((n & 0xFF) << 56) | int.from_bytes(s[end:], "little")
    v3 ^= b
    v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 2)
    v0 ^= b
    v2 ^= 0xFF
    v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


def hash64(s: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TF's `Hash64(data, n, seed)` (MurmurHash64A), as its StringToHashBucket."""
    m = 0xC6A4A7935BD1E995
    n = len(s)
    h = (seed ^ (n * m)) & _M
    end = n - n % 8
    for i in range(0, end, 8):
        k = (_f64(s, i) * m) & _M
        k ^= k >> 47
        h = ((h ^ ((k * m) & _M)) * m) & _M
    if end != n:
        h = ((h ^ int.from_bytes(s[end:], "little")) * m) & _M
    h ^= h >> 47
    h = (h * m) & _M
    return h ^ (h >> 47)


def _as_bytes(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _buckets(values, hash_fn, num_buckets: int) -> np.ndarray:
    flat = np.asarray(values, dtype=object).reshape(-1)
    out = np.fromiter((hash_fn(_as_bytes(v)) % num_buckets for v in flat), np.int64, flat.size)
    return out.reshape(np.shape(values))


def _register(op_type: str, arg: str, extra_attrs: dict | None = None):
    op_def = register_op(
        op_type,
        inputs=[f"{arg}: string"],
        outputs=["output: int64"],
        attrs={"num_buckets": REQUIRED, **(extra_attrs or {})},
        shape_fn=lambda op: [op.inputs[0].shape],
    )
    NotDifferentiable(op_type)
    return op_def


def _num_buckets(ctx) -> int:
    n = int(ctx.attrs["num_buckets"])
    if n < 1:
        raise errors.InvalidArgumentError(None, None, f"num_buckets must be >= 1, got {n}")
    return n


StringToHashBucketFast = _register("StringToHashBucketFast", "input")
StringToHashBucketStrong = _register("StringToHashBucketStrong", "input", {"key": REQUIRED})
StringToHashBucket = _register("StringToHashBucket", "string_tensor")


@StringToHashBucketFast.kernel("CPU")
async def _fast(ctx, x):
    return await ctx.compute(_buckets, x, fingerprint64, _num_buckets(ctx))


@StringToHashBucketStrong.kernel("CPU")
async def _strong(ctx, x):
    key = [int(k) for k in ctx.attrs["key"]]
    if len(key) != 2:
        raise errors.InvalidArgumentError(None, None, "Key must have 2 elements")
    k0, k1 = (k & _M for k in key)
    return await ctx.compute(_buckets, x, lambda s: siphash24(k0, k1, s), _num_buckets(ctx))


@StringToHashBucket.kernel("CPU")
async def _legacy(ctx, x):
    return await ctx.compute(_buckets, x, hash64, _num_buckets(ctx))


def _check_buckets(op_type: str, num_buckets) -> int:
    n = int(num_buckets)
    if n < 1:
        raise ValueError(f"Attr 'num_buckets' of '{op_type}' Op passed {n} less than minimum 1.")
    return n


def _strings_input(x, name: str):
    x = ops.convert_to_tensor(x, dtype=dtypes.string, name=name)
    return x


@_ragged.dispatch_unary
def string_to_hash_bucket_fast(input, num_buckets, name=None):  # noqa: A002 - TF's name
    """`tf.strings.to_hash_bucket_fast`: FarmHash Fingerprint64 of each string modulo
    `num_buckets` (int64), as TF's feature columns hash."""
    n = _check_buckets("StringToHashBucketFast", num_buckets)
    x = _strings_input(input, "input")
    return ops.apply_op("StringToHashBucketFast", [x], {"num_buckets": n}, name=name).outputs[0]


@_ragged.dispatch_unary
def string_to_hash_bucket_strong(input, num_buckets, key, name=None):  # noqa: A002
    """`tf.strings.to_hash_bucket_strong`: SipHash-2-4 under `key` (two ints) of each
    string modulo `num_buckets` (int64)."""
    n = _check_buckets("StringToHashBucketStrong", num_buckets)
    x = _strings_input(input, "input")
    attrs = {"num_buckets": n, "key": [int(k) for k in key]}
    return ops.apply_op("StringToHashBucketStrong", [x], attrs, name=name).outputs[0]


@_ragged.dispatch_unary
def string_to_hash_bucket(string_tensor=None, num_buckets=None, name=None, input=None):  # noqa: A002
    """`tf.strings.to_hash_bucket` (TF1's `string_to_hash_bucket`): TF's Hash64 of each
    string modulo `num_buckets` (int64); `input` is TF 2's name for `string_tensor`."""
    from asyncflow.deprecation import deprecated_argument_lookup

    string_tensor = deprecated_argument_lookup("input", input, "string_tensor", string_tensor)
    n = _check_buckets("StringToHashBucket", num_buckets)
    x = _strings_input(string_tensor, "string_tensor")
    return ops.apply_op("StringToHashBucket", [x], {"num_buckets": n}, name=name).outputs[0]
