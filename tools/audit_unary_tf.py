"""Compare asyncflow's unary math ops with TF 2.21's recorded outputs (the table of
docs/tf_numerics.md "Unary ops against TF 2.21").

    /work/tfvenv/bin/python tests/fixtures/record_unary_tf.py --audit /tmp/unary_tf.npz
    .venv/bin/python tools/audit_unary_tf.py /tmp/unary_tf.npz

Each op runs in a Session on /cpu:0 (the kernels TF1 programs reach) over the
recorded inputs, and over arrays of every length 1-40.  Prints a Markdown table: op,
dtype, the fraction of inputs whose bits differ from TF's (NaN equal to NaN), the
largest difference in units in the last place among finite results, the differing
values among the arrays of length 1-40, and the inputs whose NaN-ness or infinity
differs.
"""

from __future__ import annotations

import sys

import numpy as np

import asyncflow as af

OPS = {
    "Exp": af.exp,
    "Log": af.log,
    "Log1p": af.log1p,
    "Expm1": af.expm1,
    "Sqrt": af.sqrt,
    "Rsqrt": af.rsqrt,
    "Reciprocal": af.reciprocal,
    "Softplus": af.nn.softplus,
    "Softsign": af.nn.softsign,
    "Elu": af.nn.elu,
    "Selu": af.nn.selu,
    "Erf": af.math.erf,
    "Erfc": af.math.erfc,
    "Sin": af.sin,
    "Cos": af.cos,
    "Atan": af.atan,
    "Square": af.square,
    "Relu6": af.nn.relu6,
    "Sigmoid": af.sigmoid,
    "Tanh": af.tanh,
}
TAILS = 40


def ordered(a: np.ndarray) -> np.ndarray:
    """Float bits as integers ordered as the floats are (-0 and +0 both 0)."""
    ints = a.view(f"i{a.itemsize}").astype(np.int64)
    top = np.int64(1) << (8 * a.itemsize - 1)
    return np.where(ints < 0, -(ints & (top - 1)), ints)


def compare(got: np.ndarray, want: np.ndarray):
    """(differing fraction, max ulps among finite pairs, special mismatches)."""
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    both = ~nan_g & ~nan_w
    width = f"i{want.itemsize}"
    differ = (nan_g != nan_w) | (both & (got.view(width) != want.view(width)))
    finite = both & np.isfinite(got) & np.isfinite(want)
    ulps = np.abs(ordered(got[finite]) - ordered(want[finite]))
    special = np.count_nonzero((nan_g != nan_w) | (both & (np.isinf(got) != np.isinf(want))))
    return differ.mean(), int(ulps.max(initial=0)), special, int(np.count_nonzero(differ))


def main(path: str) -> None:
    data = np.load(path, allow_pickle=False)
    print("| op | dtype | differ | max ulps | differ at lengths 1-40 | NaN/inf differ |")
    print("|---|---|---|---|---|---|")
    for dtype, af_dtype in (("float32", af.float32), ("float16", af.float16)):
        src = data[f"tails_{dtype}"]
        with af.Graph().as_default(), af.device("/cpu:0"):
            p = af.placeholder(af_dtype, [None])
            ys = {op: fn(p) for op, fn in OPS.items()}
            with af.Session() as sess:
                for op, y in ys.items():
                    x, want = data[f"{op}_{dtype}_x"], data[f"{op}_{dtype}_y"]
                    got = sess.run(y, {p: x})
                    frac, ulps, special, n = compare(got, want)
                    tails = np.concatenate(
                        [sess.run(y, {p: src[:k]}) for k in range(1, TAILS + 1)]
                    )
                    tail_n = compare(tails, data[f"{op}_{dtype}_tails"])[3]
                    print(
                        f"| {op} | {dtype} | {frac:.4%} ({n} of {x.size}) | {ulps} "
                        f"| {tail_n} of {tails.size} | {special} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/unary_tf.npz")
