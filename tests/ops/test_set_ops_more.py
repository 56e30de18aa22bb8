"""tf.sets over TF's DenseToDenseSetOperation, DenseToSparseSetOperation,
SparseToSparseSetOperation and SetSize; tf.metrics.average_precision_at_k (built on
them) and tf.sparse.eye / expand_dims, against TF 2.21's recorded results
(tests/fixtures/sets/, recorded by record_sets_tf.py from sets_cases.py):

- the graph built here gives TF's values exactly (average precision to 1e-12);
- TF's own GraphDef (TopKV2, SparseReshape, SparseConcat, the set ops, metric
  variables) imports and runs to the same values;
- TF's errors (class and message) for bad sets at build and run time; set results
  against Python's sets.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import sets_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "sets" / "values.json").read_text())
ERRORS = json.loads((HERE / "sets" / "errors.json").read_text())


def _run_all(sess, out):
    """As the recorder: the metrics' update ops once, then their values."""
    first = {k: t for k, t in out.items() if not k.startswith("ap_") or k.endswith("_update")}
    values = sess.run(first)
    values.update(sess.run({k: t for k, t in out.items() if k not in first}))
    return values


def _check(got):
    assert set(got) == set(TABLE)
    for k, rec in TABLE.items():
        g = np.asarray(got[k])
        if g.dtype.kind in "OS":
            assert [x.decode() for x in g.tolist()] == rec["value"], k
            continue
        assert g.dtype == np.dtype(rec["dtype"]), k
        if k.startswith("ap_"):
            np.testing.assert_allclose(g, rec["value"], rtol=1e-12, err_msg=k)
        else:
            assert g.tolist() == rec["value"], k


def test_built_here_matches_tf():
    with tf.Graph().as_default():
        out = cases.build(tf)
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            got = _run_all(sess, out)
    assert out["ds_union_values"].op.type == "DenseToSparseSetOperation"
    assert out["ss_union_values"].op.type == "SparseToSparseSetOperation"
    assert out["size_sparse"].op.type == "SetSize"
    _check(got)


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "sets" / "graph.pb").read_bytes())
    types = {n.op for n in gd.node}
    assert {"DenseToSparseSetOperation", "SparseToSparseSetOperation", "SetSize"} <= types
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        out = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in TABLE.items()}
        inits = [op for op in g.get_operations() if op.type == "Assign"]
        with tf.Session() as sess:
            sess.run(inits)
            got = _run_all(sess, out)
    _check(got)


@pytest.mark.parametrize("name", sorted(cases.ERRORS))
def test_errors_match_tf(name):
    want = ERRORS[name]
    with tf.Graph().as_default():
        if want["when"] == "build":
            with pytest.raises(
                {"ValueError": ValueError, "TypeError": TypeError}[want["error"]]
            ) as info:
                cases.ERRORS[name](tf)
            # (TF prints dtypes and tensors its own way: the message's first words)
            assert want["message"].split("`")[0].split("<")[0] in str(info.value)
            return
        t = cases.ERRORS[name](tf)
        with tf.Session() as sess:
            with pytest.raises(getattr(tf.errors, want["error"])) as info:
                sess.run(t)
    assert want["message"] in str(info.value)


@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_sets_against_python_sets(seed):
    rng = np.random.default_rng(seed)
    dense = rng.integers(0, 6, (3, 4, 5))
    mask = rng.random((3, 4, 7)) < 0.5
    idx = np.argwhere(mask)
    vals = rng.integers(0, 8, len(idx))
    groups = [{(i, j): set() for i in range(3) for j in range(4)}]
    for (i, j, _), v in zip(idx, vals):
        groups[0][i, j].add(int(v))
    with tf.Graph().as_default(), tf.Session() as sess:
        sp = tf.SparseTensor(idx, vals, [3, 4, 7])
        results = sess.run(
            {
                op: tf.sets.set_difference(dense, sp)
                if op == "-"
                else (
                    tf.sets.set_union(dense, sp)
                    if op == "|"
                    else tf.sets.set_intersection(dense, sp)
                )
                for op in "-|&"
            }  # fmt: skip
        )
        sizes = sess.run(tf.sets.set_size(sp))
    for op, r in results.items():
        for i in range(3):
            for j in range(4):
                a, b = set(dense[i, j].tolist()), groups[0][i, j]
                want = sorted(a - b if op == "-" else (a | b if op == "|" else a & b))
                row = (r.indices[:, 0] == i) & (r.indices[:, 1] == j)
                assert r.values[row].tolist() == want
                assert r.indices[row, 2].tolist() == list(range(len(want)))
    assert sizes.tolist() == [[len(groups[0][i, j]) for j in range(4)] for i in range(3)]
