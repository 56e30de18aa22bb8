"""Stateless random ops with TensorFlow's numbers: a (key, counter) of TF's Philox4x32-10
stream (ops/philox_random.py) and TF's distributions over it, so that the same seed gives
the same values as TF 2.21 on CPU.

- A seed [2] becomes a (key, counter) as TF's GenerateKey scrambles it: one Philox block
  of the counter (seed0, seed1) under a fixed key gives the key (its first two words)
  and the counter's upper half (the last two).  `StatelessRandomGetKeyCounter` gives
  that pair as tensors; the V2 ops (`StatelessRandomUniformV2`, ...) take it.
- `RngReadAndSkip` is `tf.random.Generator`'s step: it returns the state variable's
  [counter_lo, counter_hi, key] and moves the counter 256 blocks per requested value,
  as TF does, so a Generator's draws are TF's.
- `StatelessMultinomial` draws as TF's kernel in one shard: row after row, one double
  per sample, from one stream.  (TF splits a large batch over threads at offsets that
  depend on its thread pool; rows of such a batch follow each other here.)

All kernels run on the host ("CPU"): the draws are cheap next to the Python around them.
Float32 normals are TF's Box-Muller over the same words, but TF rounds through glibc's
logf / sincosf where ops/philox_random.py rounds double results: about 1.5% of float32
normals (and what is drawn from them) are one ulp off TF's.
"""

from __future__ import annotations

import enum

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import philox_random as pr
from asyncflow.ops import stateless_random_dists as dists
from asyncflow.ops.data_flow_stack_ops import handle_object
from asyncflow.ops.state_ops import VarRef
from asyncflow.registry import INDEX, NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "Algorithm",
    "create_rng_state",
    "fold_in",
    "key_counter_of_seed",
    "split",
    "stateless_categorical",
    "stateless_multinomial",
    "stateless_random_binomial",
    "stateless_random_gamma",
    "stateless_random_poisson",
]

_U64 = (1 << 64) - 1
_M32 = 0xFFFFFFFF
_SCRAMBLE_KEY = (0x3EC8F720, 0x02461E29)  # TF's GenerateKey
_RESERVED = 256  # counter blocks per output a Generator skips (TF's RngSkip)
_FLOATS = TypeConstraint(["float16", "bfloat16", "float32", "float64"], "float32")
_INTS = TypeConstraint(["int32", "int64"], "int64")
_FULL_INTS = TypeConstraint(["int32", "int64", "uint32", "uint64"], "uint64")
_SEED_T = TypeConstraint(["int32", "int64"], "int64")
_PHILOX, _AUTO = 1, 3


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def make_shape(shape) -> tuple[int, ...]:
    shape = np.asarray(shape)
    if shape.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"shape must be a vector of {{int32,int64}}, got shape "
            f"{_shape_str(shape.shape)}"
        )  # fmt: skip
    dims = tuple(int(d) for d in shape)
    for d in dims:
        if d < 0:
            raise errors.InvalidArgumentError(None, None, f"Dimension {d} must be >= 0")
    return dims


def key_counter_of_seed(seed) -> tuple[tuple[int, int], int]:
    """TF's GenerateKey: the Philox key (two 32-bit words) and 128-bit counter of a seed.

    Raises:
      InvalidArgumentError: the seed is not of shape [2].
    """
    seed = np.asarray(seed)
    if seed.shape != (2,):
        raise errors.InvalidArgumentError(
            None, None, f"seed must have shape [2], not {_shape_str(seed.shape)}"
        )
    s0, s1 = (int(v) & _U64 for v in seed)
    w = pr.philox_words(np, _SCRAMBLE_KEY, s0 | (s1 << 64), 1)[0]
    return (int(w[0]), int(w[1])), (int(w[2]) << 64) | (int(w[3]) << 96)


def _key_counter_of_tensors(key, counter, alg) -> tuple[tuple[int, int], int]:
    alg = int(np.asarray(alg))
    if alg not in (_PHILOX, _AUTO):
        raise errors.InvalidArgumentError(None, None, f"Unsupported algorithm id: {alg}")
    key, counter = np.asarray(key), np.asarray(counter)
    if key.shape != (1,):
        raise errors.InvalidArgumentError(
            None, None, f"key must have shape [1], not {_shape_str(key.shape)}. (Note that "
            "batched keys are not supported yet.)"
        )  # fmt: skip
    if counter.ndim != 1 or counter.shape[0] < 2:
        raise errors.InvalidArgumentError(
            None, None, f"counter must be a vector of length at least 2, got shape "
            f"{_shape_str(counter.shape)}"
        )  # fmt: skip
    k = int(key[0]) & _U64
    c = (int(counter[0]) & _U64) | ((int(counter[1]) & _U64) << 64)
    return (k & _M32, k >> 32), c


# -- the distributions over a (key, counter) ---------------------------------------------


def _uniform(key, counter, shape, dtype):
    n = int(np.prod(shape))
    return pr.uniform(np, key, counter, n, dtype.as_numpy_dtype).reshape(shape)


def _normal(key, counter, shape, dtype):
    n = int(np.prod(shape))
    return pr.normal(np, key, counter, n, dtype.as_numpy_dtype).reshape(shape)


def _truncated(key, counter, shape, dtype):
    n = int(np.prod(shape))
    return pr.truncated_normal(np, key, counter, n, dtype.as_numpy_dtype).reshape(shape)


def _full_int(key, counter, shape, dtype):
    n = int(np.prod(shape))
    np_dtype = np.dtype(dtype.as_numpy_dtype)
    if np_dtype.itemsize == 4:
        w = pr.philox_words(np, key, counter, -(-n // 4)).reshape(-1)[:n]
        return w.view(np_dtype).reshape(shape)
    w = pr.philox_words(np, key, counter, -(-n // 2)).reshape(-1, 2)[:n].astype(np.uint64)
    return (w[:, 0] | (w[:, 1] << np.uint64(32))).view(np_dtype).reshape(shape)


def _uniform_int(key, counter, shape, dtype, lo, hi):
    n = int(np.prod(shape))
    if n and lo >= hi:
        raise errors.InvalidArgumentError(None, None, f"Need minval < maxval, got {lo} >= {hi}")
    np_dtype = dtype.as_numpy_dtype
    return pr.uniform_int(np, key, counter, n, lo, hi, np_dtype).reshape(shape)


# -- seeds to (key, counter) ----------------------------------------------------------------


def _vector_shape(n):
    return lambda op: [tensor_shape.TensorShape([n])]


StatelessRandomGetKeyCounter = register_op(
    "StatelessRandomGetKeyCounter",
    inputs=["seed: Tseed"],
    outputs=["key: uint64", "counter: uint64"],
    attrs={"Tseed": _SEED_T},
    shape_fn=lambda op: [tensor_shape.TensorShape([1]), tensor_shape.TensorShape([2])],
)
NotDifferentiable("StatelessRandomGetKeyCounter")


@StatelessRandomGetKeyCounter.kernel("CPU")
async def _get_key_counter(ctx, seed):
    (k0, k1), c = key_counter_of_seed(seed)
    key = np.array([k0 | (k1 << 32)], np.uint64)
    return key, np.array([c & _U64, c >> 64], np.uint64)


# -- V1 (seed) and V2 (key, counter, alg) ops of each distribution ------------------------


def _shape_of(op):
    op.inputs[0].shape.with_rank(1)
    if op.type.endswith("V2"):
        op.inputs[1].shape.merge_with(tensor_shape.TensorShape([1]))
    else:
        op.inputs[1].shape.merge_with(tensor_shape.TensorShape([2]))
    return [ops.constant_shape(op.inputs[0])]


def _register_pair(name: str, draw, dtype_attr, extra_inputs=()):
    """`Stateless<name>` (shape, seed, ...) and `Stateless<name>V2` (shape, key, counter,
    alg, ...), drawing `draw(key, counter, shape, dtype, *extra)`."""
    v1 = register_op(
        f"Stateless{name}",
        inputs=["shape: T", "seed: Tseed", *extra_inputs],
        outputs=["output: dtype"],
        attrs={"dtype": dtype_attr, "T": INDEX, "Tseed": _SEED_T},
        shape_fn=_shape_of,
    )
    v2 = register_op(
        f"Stateless{name}V2",
        inputs=["shape: Tshape", "key: uint64", "counter: uint64", "alg: int32",
                *extra_inputs],
        outputs=["output: dtype"],
        attrs={"dtype": dtype_attr, "Tshape": INDEX},
        shape_fn=_shape_of,
    )  # fmt: skip
    NotDifferentiable(f"Stateless{name}")
    NotDifferentiable(f"Stateless{name}V2")

    @v1.kernel("CPU")
    async def _v1(ctx, shape, seed, *extra):
        key, counter = key_counter_of_seed(seed)
        return draw(key, counter, make_shape(shape), ctx.attrs["dtype"], *extra)

    @v2.kernel("CPU")
    async def _v2(ctx, shape, key, counter, alg, *extra):
        key, counter = _key_counter_of_tensors(key, counter, alg)
        return draw(key, counter, make_shape(shape), ctx.attrs["dtype"], *extra)

    return v1, v2


def _int_range(key, counter, shape, dtype, minval, maxval):
    lo, hi = np.asarray(minval), np.asarray(maxval)
    if lo.ndim or hi.ndim:
        raise errors.InvalidArgumentError(
            None, None, f"minval must be 0-D, got shape {_shape_str(lo.shape)}"
            if lo.ndim else f"maxval must be 0-D, got shape {_shape_str(hi.shape)}"
        )  # fmt: skip
    return _uniform_int(key, counter, shape, dtype, int(lo), int(hi))


_register_pair("RandomUniformFullInt", _full_int, _FULL_INTS)
_register_pair("RandomUniformInt", _int_range, _INTS, ("minval: dtype", "maxval: dtype"))
_register_pair("RandomUniform", _uniform, _FLOATS)
_register_pair("RandomNormal", _normal, _FLOATS)
# (TF's V1 name is StatelessTruncatedNormal, without "Random")
_register_pair("TruncatedNormal", _truncated, _FLOATS)


# -- gamma, poisson, binomial: ops/stateless_random_dists.py draws them ------------------

check_ends_with = dists.check_ends_with


_PARAM_T = TypeConstraint(["float16", "float32", "float64"], "float32")
_RATE_T = TypeConstraint(["float16", "float32", "float64", "int32", "int64"])
_COUNT_OUT = TypeConstraint(["float16", "float32", "float64", "int32", "int64"], "int64")


def _tail_shape(op):
    op.inputs[0].shape.with_rank(1)
    return [ops.constant_shape(op.inputs[0])]


StatelessRandomGammaV3 = register_op(
    "StatelessRandomGammaV3",
    inputs=["shape: shape_dtype", "key: uint64", "counter: uint64", "alg: int32",
            "alpha: dtype"],
    outputs=["output: dtype"],
    attrs={"dtype": _PARAM_T, "shape_dtype": INDEX},
    shape_fn=_tail_shape,
)  # fmt: skip
StatelessRandomGammaV2 = register_op(
    "StatelessRandomGammaV2",
    inputs=["shape: T", "seed: Tseed", "alpha: dtype"],
    outputs=["output: dtype"],
    attrs={"dtype": _PARAM_T, "T": INDEX, "Tseed": _SEED_T},
    shape_fn=_tail_shape,
)
StatelessRandomPoisson = register_op(
    "StatelessRandomPoisson",
    inputs=["shape: T", "seed: Tseed", "lam: Rtype"],
    outputs=["output: dtype"],
    attrs={"Rtype": _RATE_T, "dtype": _COUNT_OUT, "T": INDEX, "Tseed": _SEED_T},
    shape_fn=_tail_shape,
)
StatelessRandomBinomial = register_op(
    "StatelessRandomBinomial",
    inputs=["shape: S", "seed: Tseed", "counts: T", "probs: T"],
    outputs=["output: dtype"],
    attrs={"S": INDEX, "Tseed": _SEED_T, "T": _RATE_T, "dtype": _COUNT_OUT},
    shape_fn=_tail_shape,
)
for _name in ("StatelessRandomGammaV3", "StatelessRandomGammaV2", "StatelessRandomPoisson",
              "StatelessRandomBinomial"):  # fmt: skip
    NotDifferentiable(_name)


def _np(ctx):
    return ctx.attrs["dtype"].as_numpy_dtype


async def _off_loop(ctx, fn, n: int):
    """Per-output Python loops run on the device's workers, never holding the loop."""
    return await ctx.device.compute(fn, cost=64 * max(n, 1))


@StatelessRandomGammaV3.kernel("CPU")
async def _gamma_v3(ctx, shape, key, counter, alg, alpha):
    key, counter = _key_counter_of_tensors(key, counter, alg)
    dims = make_shape(shape)
    return await _off_loop(ctx, lambda: dists.gamma(key, counter, dims, _np(ctx), alpha),
                           int(np.prod(dims)))  # fmt: skip


@StatelessRandomGammaV2.kernel("CPU")
async def _gamma_v2(ctx, shape, seed, alpha):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    return await _off_loop(ctx, lambda: dists.gamma(key, counter, dims, _np(ctx), alpha),
                           int(np.prod(dims)))  # fmt: skip


@StatelessRandomPoisson.kernel("CPU")
async def _poisson_kernel(ctx, shape, seed, lam):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    return await _off_loop(ctx, lambda: dists.poisson(key, counter, dims, _np(ctx), lam),
                           int(np.prod(dims)))  # fmt: skip


@StatelessRandomBinomial.kernel("CPU")
async def _binomial_kernel(ctx, shape, seed, counts, probs):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    np_dtype = _np(ctx)

    def draw():
        return dists.binomial(key, counter, dims, np_dtype, counts, probs)

    return await _off_loop(ctx, draw, int(np.prod(dims)))


# -- StatelessMultinomial ------------------------------------------------------------------


def _multinomial_shape(op):
    logits = op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(0)
    op.inputs[2].shape.merge_with(tensor_shape.TensorShape([2]))
    n = ops.constant_value(op.inputs[1])
    return [tensor_shape.TensorShape([logits[0], None if n is None else int(n)])]


StatelessMultinomial = register_op(
    "StatelessMultinomial",
    inputs=["logits: T", "num_samples: int32", "seed: Tseed"],
    outputs=["output: output_dtype"],
    attrs={"T": TypeConstraint(["float16", "bfloat16", "float32", "float64"]),
           "Tseed": _SEED_T, "output_dtype": _INTS},
    shape_fn=_multinomial_shape,
)  # fmt: skip
NotDifferentiable("StatelessMultinomial")


@StatelessMultinomial.kernel("CPU")
async def _stateless_multinomial(ctx, logits, num_samples, seed):
    logits, num_samples = np.asarray(logits), np.asarray(num_samples)
    if logits.ndim != 2:
        raise errors.InvalidArgumentError(
            None, None, f"logits should be a matrix, got shape {_shape_str(logits.shape)}"
        )
    if num_samples.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_samples should be a scalar, got shape "
            f"{_shape_str(num_samples.shape)}"
        )  # fmt: skip
    n = int(num_samples)
    if n < 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_samples should be nonnegative, got {n}"
        )
    if logits.shape[1] <= 0 and logits.shape[0] > 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_classes should be positive, got {logits.shape[1]}"
        )
    key, counter = key_counter_of_seed(seed)
    np_dtype = ctx.attrs["output_dtype"].as_numpy_dtype
    return await _off_loop(ctx, lambda: dists.multinomial(key, counter, logits, n, np_dtype),
                           logits.size + logits.shape[0] * n)  # fmt: skip


# -- RngReadAndSkip: tf.random.Generator's state ------------------------------------------

RngReadAndSkip = register_op(
    "RngReadAndSkip",
    inputs=["resource: resource", "alg: int32", "delta: uint64"],
    outputs=["value: int64"],
    shape_fn=_vector_shape(3),
    stateful=True,
)
NotDifferentiable("RngReadAndSkip")


@RngReadAndSkip.kernel("CPU")
async def _rng_read_and_skip(ctx, handle, alg, delta):
    return _read_and_skip(handle, int(np.asarray(alg)), int(np.asarray(delta)))


def _read_and_skip(handle, alg: int, delta: int) -> np.ndarray:
    """The generator's state before, its counter moved 256 blocks per `delta` (TF's).
    No await between the read and the write: atomic on the loop."""
    var = handle_object(handle, VarRef, "resource variable")
    if var.value is None:
        raise errors.FailedPreconditionError(
            None, None, f"Error while reading resource variable {var.name}. This could mean "
            "that the variable was uninitialized."
        )  # fmt: skip
    return skip_state(var, alg, delta, 0)


def skip_state(var, alg: int, delta: int, offset: int) -> np.ndarray:
    """Move the Philox counter at `offset` of the (initialized) state variable `var` past
    `delta` outputs of 256 blocks each; return the state before.  As TF's PhiloxRandom
    Skip, `delta * 256` wraps to 64 bits before it is added to the 128-bit counter.

    Raises:
      UnimplementedError: ThreeFry (XLA-only in TF).  InvalidArgumentError: another
        unknown algorithm, or a state too short for Philox.
    """
    if alg == 2:
        raise errors.UnimplementedError(
            None, None, "Non-XLA devices don't support the ThreeFry algorithm."
        )
    if alg not in (_PHILOX, _AUTO):
        raise errors.InvalidArgumentError(None, None, f"Unsupported algorithm id: {alg}")
    state = np.asarray(var.value)
    if state.dtype != np.int64 or state.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, "The RNG state must be an int64 vector, got "
            f"{state.dtype} {_shape_str(state.shape)}"
        )  # fmt: skip
    if state.size - offset < 3:
        raise errors.InvalidArgumentError(
            None, None, "For the Philox algorithm, the size of state must be at least 3; got "
            f"{state.size - offset}"
        )  # fmt: skip
    old = state.copy()
    words = old.view(np.uint64)
    c = int(words[offset]) | (int(words[offset + 1]) << 64)
    c = (c + ((delta * _RESERVED) & _U64)) & ((1 << 128) - 1)
    new = old.copy()
    new.view(np.uint64)[offset : offset + 2] = [c & _U64, c >> 64]
    var.assign(new, False, np)
    return old


def _key_counter_of_state(state) -> tuple[tuple[int, int], int]:
    words = np.asarray(state).view(np.uint64)
    k = int(words[2])
    return (k & _M32, k >> 32), int(words[0]) | (int(words[1]) << 64)


StatefulRandomBinomial = register_op(
    "StatefulRandomBinomial",
    inputs=["resource: resource", "algorithm: int64", "shape: S", "counts: T", "probs: T"],
    outputs=["output: dtype"],
    attrs={"S": INDEX, "T": TypeConstraint(["float16", "float32", "float64", "int32", "int64"],
                                           "float64"), "dtype": _COUNT_OUT},
    shape_fn=lambda op: [ops.constant_shape(op.inputs[2])],
    stateful=True,
)  # fmt: skip
NotDifferentiable("StatefulRandomBinomial")


@StatefulRandomBinomial.kernel("CPU")
async def _stateful_binomial(ctx, handle, algorithm, shape, counts, probs):
    """Generator.binomial: TF's binomial (as StatelessRandomBinomial) from the state's
    (key, counter), the counter moved past 2 * 100 blocks per 4 samples of each batch
    member (TF's reservation)."""
    dims = make_shape(shape)
    counts, probs = np.asarray(counts), np.asarray(probs)
    try:
        members = int(np.prod(np.broadcast_shapes(counts.shape, probs.shape)))
    except ValueError:
        members = 1  # (dists.binomial raises TF's error)
    per = int(np.prod(dims)) // members if members else 0
    state = _read_and_skip(handle, int(np.asarray(algorithm)), members * 200 * (per + 3) // 4)
    key, counter = _key_counter_of_state(state)
    np_dtype = _np(ctx)

    def draw():
        return dists.binomial(key, counter, dims, np_dtype, counts, probs)

    return await _off_loop(ctx, draw, int(np.prod(dims)))


StatelessRandomGetKeyCounterAlg = register_op(
    "StatelessRandomGetKeyCounterAlg",
    inputs=["seed: Tseed"],
    outputs=["key: uint64", "counter: uint64", "alg: int32"],
    attrs={"Tseed": _SEED_T},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([1]), tensor_shape.TensorShape([2]), tensor_shape.TensorShape([])
    ],
)  # fmt: skip
NotDifferentiable("StatelessRandomGetKeyCounterAlg")


@StatelessRandomGetKeyCounterAlg.kernel("CPU")
async def _get_key_counter_alg(ctx, seed):
    key, counter = await _get_key_counter(ctx, seed)
    return key, counter, np.array(_PHILOX, np.int32)


# -- builders ------------------------------------------------------------------------------


class Algorithm(enum.Enum):
    """`tf.random.Algorithm`: the counter-based generators (only Philox draws here)."""

    PHILOX = 1
    THREEFRY = 2
    AUTO_SELECT = 3


def convert_alg_to_int(alg) -> int:
    """An algorithm given as an int, an Algorithm or a name ("philox", "auto_select").

    Raises:
      ValueError: an unknown name.  TypeError: another kind of value.
    """
    if isinstance(alg, Algorithm):
        return alg.value
    if isinstance(alg, int):
        return alg
    if isinstance(alg, ops.Tensor):
        return alg
    if isinstance(alg, str):
        canon = alg.strip().lower().replace("-", "").replace("_", "")
        names = {"philox": 1, "threefry": 2, "autoselect": 3}
        if canon in names:
            return names[canon]
        raise ValueError(_unsupported_alg(alg))
    raise TypeError(f"Can't convert argument `alg` (of value {alg} and type {type(alg)}) to int.")


def _unsupported_alg(alg) -> str:
    return (
        f"Argument `alg` got unsupported value {alg}. Supported values are "
        f"{Algorithm.PHILOX}/'philox' for the Philox algorithm, "
        f"{Algorithm.THREEFRY}/'threefry' for the ThreeFry algorithm, and "
        f"{Algorithm.AUTO_SELECT}/'auto_select' for auto-selection."
    )


def shape_tensor(shape):
    if isinstance(shape, ops.Tensor):
        return shape
    dims = tensor_shape.as_shape(shape).as_list() if isinstance(
        shape, tensor_shape.TensorShape) else list(shape)  # fmt: skip
    return ops.convert_to_tensor(dims, dtype=dtypes.int64 if not dims else None, name="shape")


def _apply(op_type, inputs, attrs, name=None):
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs[0]


def _key_counter_alg(seed):
    seed = ops.convert_to_tensor(seed, name="seed")
    op = ops.apply_op("StatelessRandomGetKeyCounterAlg", [seed], {"Tseed": seed.dtype})
    return op.outputs


def stateless_multinomial(logits, num_samples, seed, output_dtype=dtypes.int64, name=None):
    """`tf.random.stateless_multinomial`: TF's draws for a [2] seed (module note)."""
    with ops.name_scope(name, "stateless_multinomial", [logits, seed]):
        return _multinomial_impl(logits, num_samples, output_dtype, seed)


def stateless_categorical(logits, num_samples, seed, dtype=dtypes.int64, name=None):
    """`tf.random.stateless_categorical`: [batch, num_samples] class indices drawn from
    the rows of `logits` (unnormalized log-probabilities), TF's numbers for a [2] seed.

    Raises:
      ValueError: `dtype` is not int32 or int64.
    """
    with ops.name_scope(name, "stateless_categorical", [logits, seed]):
        return _multinomial_impl(logits, num_samples, dtype, seed)


def _multinomial_impl(logits, num_samples, dtype, seed):
    logits = ops.convert_to_tensor(logits, name="logits")
    dtype = dtypes.as_dtype(dtype) if dtype else dtypes.int64
    accepted = (dtypes.int32, dtypes.int64)
    if dtype not in accepted:
        raise ValueError(
            f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are {accepted}."
        )
    n = ops.convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
    seed = ops.convert_to_tensor(seed, name="seed")
    attrs = {"T": logits.dtype, "Tseed": seed.dtype, "output_dtype": dtype}
    return _apply("StatelessMultinomial", [logits, n, seed], attrs)


def stateless_random_gamma(shape, seed, alpha, beta=None, dtype=dtypes.float32, name=None):
    """`tf.random.stateless_gamma`: gamma(alpha) / beta draws, `shape` ending with the
    broadcast shape of alpha and beta; TF's numbers for a [2] seed (at least the
    dtype's smallest normal number, as TF clips them)."""
    from asyncflow.ops import array_ops, framework_ops, manip_ops, math_ops

    with ops.name_scope(name, "stateless_random_gamma", [shape, seed, alpha, beta]):
        shape = shape_tensor(shape)
        alpha = ops.convert_to_tensor(alpha, dtype=dtype, name="alpha")
        beta = ops.convert_to_tensor(1 if beta is None else beta, name="beta", dtype=dtype)
        both = framework_ops.broadcast_dynamic_shape(array_ops.shape(alpha), array_ops.shape(beta))
        alpha_b = manip_ops.broadcast_to(alpha, both)
        key, counter, alg = _key_counter_alg(seed)
        rnd = _apply("StatelessRandomGammaV3", [shape, key, counter, alg, alpha_b],
                     {"dtype": alpha.dtype, "shape_dtype": shape.dtype})  # fmt: skip
        tiny = np.finfo(alpha.dtype.as_numpy_dtype).tiny
        return math_ops.maximum(ops.convert_to_tensor(tiny, dtype=alpha.dtype), rnd / beta)


def stateless_random_poisson(shape, seed, lam, dtype=dtypes.int32, name=None):
    """`tf.random.stateless_poisson`: Poisson(lam) draws, `shape` ending with lam's shape;
    TF's numbers for a [2] seed."""
    with ops.name_scope(name, "stateless_random_poisson", [shape, seed, lam]):
        shape = shape_tensor(shape)
        seed = ops.convert_to_tensor(seed, name="seed")
        lam = ops.convert_to_tensor(lam, name="lam")
        attrs = {"Rtype": lam.dtype, "dtype": dtypes.as_dtype(dtype), "T": shape.dtype,
                 "Tseed": seed.dtype}  # fmt: skip
        return _apply("StatelessRandomPoisson", [shape, seed, lam], attrs)


def stateless_random_binomial(shape, seed, counts, probs, output_dtype=dtypes.int32, name=None):
    """`tf.random.stateless_binomial`: Binomial(counts, probs) draws, `shape` ending with
    their broadcast shape; TF's numbers for a [2] seed."""
    with ops.name_scope(name, "stateless_random_binomial", [shape, seed, counts, probs]):
        shape = shape_tensor(shape)
        seed = ops.convert_to_tensor(seed, name="seed")
        probs = ops.convert_to_tensor(probs, preferred_dtype=dtypes.float32, name="probs")
        counts = ops.convert_to_tensor(counts, preferred_dtype=probs.dtype, name="counts")
        attrs = {"S": shape.dtype, "Tseed": seed.dtype, "T": probs.dtype,
                 "dtype": dtypes.as_dtype(output_dtype)}  # fmt: skip
        return _apply("StatelessRandomBinomial", [shape, seed, counts, probs], attrs)


def stateless_random_uniform_full_int(shape, seed, dtype=dtypes.uint64, name=None):
    """Every value of an integer dtype equally likely (TF's stateless_uniform with
    minval=maxval=None)."""
    with ops.name_scope(name, "stateless_random_uniform", [shape, seed]):
        shape = shape_tensor(shape)
        key, counter, alg = _key_counter_alg(seed)
        return _apply("StatelessRandomUniformFullIntV2", [shape, key, counter, alg],
                      {"dtype": dtypes.as_dtype(dtype), "Tshape": shape.dtype})  # fmt: skip


def split(seed, num=2, alg="auto_select"):
    """`tf.random.split`: `num` new [2] seeds from one, as TF (full-range uniform ints of
    the seed's dtype)."""
    check_alg(alg)
    seed = ops.convert_to_tensor(seed)
    return stateless_random_uniform_full_int([num, 2], seed, dtype=seed.dtype)


def fold_in(seed, data, alg="auto_select"):
    """`tf.random.fold_in`: a new [2] seed from `seed` and an integer `data`, as TF
    ([a full-range draw of data's dtype, data])."""
    from asyncflow.ops import manip_ops

    check_alg(alg)
    data = ops.convert_to_tensor(data)
    seed1 = stateless_random_uniform_full_int([], seed, dtype=data.dtype)
    return manip_ops.stack([seed1, data])


def check_alg(alg) -> None:
    alg = convert_alg_to_int(alg)
    if isinstance(alg, int) and alg not in (Algorithm.PHILOX.value, Algorithm.AUTO_SELECT.value):
        raise ValueError(_unsupported_alg(alg) + " (asyncflow draws Philox only)")


def create_rng_state(seed, alg):
    """`tf.random.create_rng_state`: the int64 [3] state of a Philox generator (counter
    low and high, key) from an integer (cut into 64-bit words, lowest first) or a vector
    (its first 3 values, zeros added on the left).  A NumPy array."""
    alg = convert_alg_to_int(alg)
    size = 3
    if isinstance(seed, int):
        words = []
        for _ in range(size):
            words.append(seed & _U64)
            seed >>= 64
        seed = words
    flat = np.asarray([int(s) & _U64 for s in np.asarray(seed).reshape(-1).tolist()], np.uint64)
    flat = flat.view(np.int64)[:size]
    return np.concatenate([np.zeros(size - flat.size, np.int64), flat])
