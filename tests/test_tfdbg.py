"""tfdbg: the debug ops, RunOptions.debug_options dumps (v1), and tfdbg2's dump files.

Every expected value here was recorded from TF 2.21 (tf.compat.v1 graph mode, CPU).
"""

import glob
import json
import math
import os
import re

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.graph_io import tensor_from_proto
from asyncflow.protos.debug_event_pb2 import DebugEvent
from asyncflow.protos.event_pb2 import Event
from asyncflow.protos.graph_pb2 import GraphDef

R = tf.raw_ops
NAN, INF = float("nan"), float("inf")


def _inputs():
    return {
        "f": tf.constant([[1.0, NAN, 3.0], [INF, -2.0, 0.0]]),
        "i": tf.constant([3, -1, 0, 7], tf.int32),
        "b": tf.constant([True, False, True]),
        "e": tf.zeros([0, 3]),
        "d": tf.constant([-INF, 1e300, 0.5], tf.float64),
        "h": tf.constant([1.0, -65504.0, NAN], tf.float16),
    }


def _run(build):
    with tf.Graph().as_default():
        t = build(_inputs())
        with tf.Session() as s:
            return t, s.run(t)


def _same(got, want):
    got = np.asarray(got, np.float64).reshape(-1)
    want = np.asarray(want, np.float64).reshape(-1)
    assert got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)  # (NaN == NaN here)


# (input, TF 2.21's DebugNumericSummary)
_SUMMARY_V1 = [
    ("f", [1, 6, 1, 0, 1, 1, 2, 1, -2, 3, 0.5, 3.25, 1, 2, 2, 3]),
    ("i", [1, 4, 0, 0, 1, 1, 2, 0, -1, 7, 2.25, 9.6875, 3, 1, 4]),
    ("b", [1, 3, 0, 0, 0, 1, 2, 0, 0, 1, 2 / 3, 0.22222222222222224, 10, 1, 3]),
    ("e", [1, 0, 0, 0, 0, 0, 0, 0, INF, -INF, NAN, NAN, 1, 2, 0, 3]),
    ("d", [1, 3, 0, 1, 0, 0, 2, 0, 0.5, 1e300, 5e299, INF, 2, 1, 3]),
]


@pytest.mark.parametrize("key,want", _SUMMARY_V1)
def test_debug_numeric_summary_v1(key, want):
    t, got = _run(lambda inp: R.DebugNumericSummary(input=inp[key], tensor_name="x:0"))
    assert t.dtype == tf.float64 and t.shape.ndims is None
    assert got.dtype == np.float64
    _same(got, want)


def test_debug_numeric_summary_bounds_count_values_at_a_bound_as_infinities():
    x = [1.0, -1.0, 2.0, 0.5]
    _, got = _run(
        lambda inp: R.DebugNumericSummary(
            input=tf.constant(x), lower_bound=-1.0, upper_bound=2.0, tensor_name="x:0"
        )
    )
    _same(got, [1, 4, 0, 1, 0, 0, 2, 1, -1, 2, 0.625, 1.171875, 1, 1, 4])
    _, got = _run(
        lambda inp: R.DebugNumericSummary(
            input=inp["f"], lower_bound=-1.0, upper_bound=2.0, tensor_name="x:0"
        )
    )
    _same(got, [1, 6, 1, 1, 0, 1, 1, 2, -2, 3, 0.5, 3.25, 1, 2, 2, 3])


def test_mute_if_healthy_changes_no_output():
    _, got = _run(
        lambda inp: R.DebugNumericSummary(
            input=tf.constant([1.0, 2.0]), mute_if_healthy=True, tensor_name="x:0"
        )
    )
    _same(got, [1, 2, 0, 0, 0, 0, 2, 0, 1, 2, 1.5, 0.25, 1, 1, 2])


# (input, TF 2.21's DebugNumericSummaryV2 for modes CURT_HEALTH, CONCISE_HEALTH,
# FULL_HEALTH, SHAPE, REDUCE_INF_NAN_THREE_SLOTS; tensor_id=7)
_SUMMARY_V2 = {
    "f": [[7, 1], [7, 6, 0, 1, 1], [7, -1, 1, 2, 6, 0, 1, 1, 1, 1, 2],
          [7, 1, 2, 6, 2, 3, 0, 0, 0, 0], [0, INF, NAN]],
    "i": [[7, 0], [7, 4, 0, 0, 0], [7, -1, 3, 1, 4, 0, 0, 0, 1, 1, 2],
          [7, 3, 1, 4, 4, 0, 0, 0, 0, 0], [0, 0, 0]],
    "b": [[7, 0], [7, 3, 0, 0, 0], [7, -1, 10, 1, 3, 0, 0, 0, 0, 1, 2],
          [7, 10, 1, 3, 3, 0, 0, 0, 0, 0], [0, 0, 0]],
    "e": [[7, 0], [7, 0, 0, 0, 0], [7, -1, 1, 2, 0, 0, 0, 0, 0, 0, 0],
          [7, 1, 2, 0, 0, 3, 0, 0, 0, 0], [0, 0, 0]],
    "d": [[7, 1], [7, 3, 1, 0, 0], [7, -1, 2, 1, 3, 1, 0, 0, 0, 0, 2],
          [7, 2, 1, 3, 3, 0, 0, 0, 0, 0], [-INF, 0, 0]],
    "h": [[7, 1], [7, 3, 0, 0, 1], [7, -1, 19, 1, 3, 0, 0, 1, 1, 0, 1],
          [7, 19, 1, 3, 3, 0, 0, 0, 0, 0], [0, 0, NAN]],
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(_SUMMARY_V2))
def test_debug_numeric_summary_v2(key):
    with tf.Graph().as_default():
        x = _inputs()[key]
        outs = [
            R.DebugNumericSummaryV2(input=x, tensor_debug_mode=m, tensor_id=7)
            for m in (2, 3, 4, 5, 8)
        ]
        # float64 output, default tensor_id -1
        out64 = R.DebugNumericSummaryV2(input=x, tensor_debug_mode=4, output_dtype=tf.float64)
        with tf.Session() as s:
            got, got64 = s.run([outs, out64])
    for g, want in zip(got, _SUMMARY_V2[key]):
        assert g.dtype == np.float32
        _same(g, want)
    assert got64.dtype == np.float64
    _same(got64, [-1] + _SUMMARY_V2[key][2][1:])


def test_debug_numeric_summary_v2_shape_keeps_the_last_six_dimensions():
    _, got = _run(lambda inp: R.DebugNumericSummaryV2(input=tf.zeros([1, 2, 3, 4, 5, 6, 7]),
                                                    tensor_debug_mode=5))  # fmt: skip
    _same(got, [-1, 1, 7, 5040, 2, 3, 4, 5, 6, 7])


@pytest.mark.parametrize("mode", [1, 6])
def test_debug_numeric_summary_v2_unimplemented_mode(mode):
    with pytest.raises(
        errors.UnimplementedError, match=f"Unimplemented tensor debug mode: {mode}"
    ):
        _run(lambda inp: R.DebugNumericSummaryV2(input=inp["f"], tensor_debug_mode=mode))


# (input, TF 2.21's DebugNanCount; None: no kernel for that dtype)
@pytest.mark.parametrize(
    "key,want", [("f", 1), ("i", 0), ("e", 0), ("d", 0), ("h", 1), ("b", None)]
)
def test_debug_nan_count(key, want):
    if want is None:
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
            _run(lambda inp: R.DebugNanCount(input=inp[key], tensor_name="x:0"))
        return
    t, got = _run(lambda inp: R.DebugNanCount(input=inp[key], tensor_name="x:0"))
    # (TF says scalar statically, yet its kernel writes a [1] vector: here both are [1].)
    assert t.dtype == tf.int64 and t.shape.as_list() == [1]
    assert got.tolist() == [want]


@pytest.mark.parametrize("op", ["DebugNumericSummary", "DebugNanCount"])
def test_no_kernel_for_strings(op):
    with pytest.raises(errors.InvalidArgumentError, match="T=DT_STRING"):
        _run(lambda inp: getattr(R, op)(input=tf.constant(["a"]), tensor_name="x:0"))


def test_no_numeric_summary_v1_kernel_for_half():
    with pytest.raises(errors.InvalidArgumentError, match="T=DT_HALF"):
        _run(lambda inp: R.DebugNumericSummary(input=inp["h"], tensor_name="x:0"))


@pytest.mark.parametrize(
    "op", ["DebugIdentity", "DebugIdentityV3", "DebugIdentityV2", "DebugGradientIdentity"]
)
def test_identities_pass_their_input(op):
    kw = {"tensor_name": "x:0"} if op in ("DebugIdentity", "DebugIdentityV3") else {}
    t, got = _run(lambda inp: getattr(R, op)(input=inp["f"], **kw))
    assert t.shape.as_list() == [2, 3]
    _same(got, [1, NAN, 3, INF, -2, 0])


@pytest.mark.parametrize("name", ["", "x:a", "x:0:1"])
def test_bad_tensor_name(name):
    with pytest.raises(errors.InvalidArgumentError, match="Failed to parse tensor name"):
        _run(lambda inp: R.DebugNanCount(input=inp["f"], tensor_name=name))


def test_gradients_as_in_tf():
    x = tf.constant([1.0, -1.0, 2.0, 0.5])
    # TF registers none for DebugIdentity(V3) and DebugNumericSummary(V2) ...
    for build in (
        lambda: R.DebugIdentity(input=x, tensor_name="x:0"),
        lambda: R.DebugIdentityV3(input=x, tensor_name="x:0"),
        lambda: R.DebugNumericSummaryV2(input=x, tensor_debug_mode=2),
        lambda: R.DebugNumericSummary(input=x, tensor_name="x:0"),
    ):
        with pytest.raises(LookupError):
            tf.gradients(tf.reduce_sum(build()), x)
    # ... DebugNanCount's integer output stops the walk; DebugIdentityV2 passes it on.
    assert tf.gradients(tf.reduce_sum(R.DebugNanCount(input=x, tensor_name="x:0")), x) == [None]
    (g,) = tf.gradients(tf.reduce_sum(R.DebugIdentityV2(input=x)), x)
    with tf.Session() as s:
        assert s.run(g).tolist() == [1.0, 1.0, 1.0, 1.0]


# -- tfdbg v1: RunOptions.debug_options ------------------------------------------------

_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
_CPU_DIR = "_tfdbg_device_,job_localhost,replica_0,task_0,device_CPU_0"


def _listing(root):
    """The dump's files, each name's trailing timestamp dropped; (names, timestamps)."""
    names, stamps = [], {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            stem, _, ts = rel.rpartition("_")
            names.append(stem)
            stamps[stem] = int(ts)
    return sorted(names), stamps


def _event(root, stem, stamps):
    with open(os.path.join(root, f"{stem}_{stamps[stem]}"), "rb") as f:
        return Event.FromString(f.read())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


@pytest.fixture
def on_cpu():
    # (The dumps' layout names the device: these cases were recorded on TF's CPU.)
    with tf.device("/cpu:0"):
        yield


def _watch(opts, node, ops, root, slot=0):
    w = opts.debug_options.debug_tensor_watch_opts.add()
    w.node_name, w.output_slot = node, slot
    w.debug_ops.extend(ops)
    w.debug_urls.append("file://" + root)


def test_run_options_dump_as_tf(tmp_path, on_cpu):
    root = str(tmp_path / "dump")
    a = tf.placeholder(tf.float32, [6], name="a")
    b = tf.multiply(a, 2.0, name="b")
    c = tf.reduce_sum(tf.abs(b, name="ab"), name="c")
    opts = tf.RunOptions()
    _watch(opts, "b", ["DebugIdentity", "DebugNanCount", "DebugNumericSummary"], root)
    _watch(opts, "c", ["DebugIdentity"], root)
    with tf.Session() as s:
        out = s.run(c, feed_dict={a: [1.0, NAN, 3.0, INF, -2.0, 0.0]}, options=opts)
    assert math.isnan(out)
    names, stamps = _listing(root)
    # (TF 2.21's dump of the same run, timestamps dropped)
    assert names == [
        "_tfdbg_core_metadata_sessionrun00000000000001",
        f"{_CPU_DIR}/_tfdbg_graph_hash{names[1].rpartition('hash')[2]}",
        f"{_CPU_DIR}/b_0_DebugIdentity",
        f"{_CPU_DIR}/b_0_DebugNanCount",
        f"{_CPU_DIR}/b_0_DebugNumericSummary",
        f"{_CPU_DIR}/c_0_DebugIdentity",
    ]
    meta = _event(root, names[0], stamps)
    assert json.loads(meta.log_message.message) == {
        "global_step": 0,
        "session_run_index": 1,
        "executor_step_index": 0,
        "input_names": ["a:0"],
        "output_names": ["c:0"],
        "target_nodes": [],
    }
    assert meta.wall_time == stamps[names[0]]
    # Each dump: one Event whose summary value names the watch, as TF writes it.
    ev = _event(root, names[2], stamps)
    assert ev.wall_time == stamps[names[2]]
    (v,) = ev.summary.value
    assert (v.tag, v.node_name) == ("b", "b:0:DebugIdentity")
    assert v.metadata.plugin_data.plugin_name == "debugger"
    assert json.loads(v.metadata.plugin_data.content) == {
        "device": _CPU,
        "outputSlot": 0,
        "numChunks": 1,
        "chunkIndex": 0,
    }
    assert v.tensor.tensor_content == np.array([2, NAN, 6, INF, -4, 0], "<f4").tobytes()
    assert [d.size for d in v.tensor.tensor_shape.dim] == [6]
    nan_count = _event(root, names[3], stamps).summary.value[0].tensor
    assert nan_count.tensor_content == np.array([1], "<i8").tobytes()
    summary = _event(root, names[4], stamps).summary.value[0].tensor
    _same(
        np.frombuffer(summary.tensor_content, "<f8"),
        [1, 6, 1, 0, 1, 1, 2, 1, -4, 6, 1, 13, 1, 1, 6],
    )
    scalar = _event(root, names[5], stamps).summary.value[0]
    assert scalar.node_name == "c:0:DebugIdentity" and not scalar.tensor.tensor_shape.dim
    assert np.isnan(np.frombuffer(scalar.tensor.tensor_content, "<f4")).all()
    # Files in the order the values were computed (DebugDumpDir checks causality).
    assert stamps[names[2]] < stamps[names[3]] < stamps[names[4]] < stamps[names[5]]
    assert stamps[names[1]] < stamps[names[0]] < stamps[names[2]]


def test_dumped_partition_graph_has_tfs_debug_nodes(tmp_path, on_cpu):
    root = str(tmp_path)
    a = tf.placeholder(tf.float32, [2], name="a")
    b = tf.multiply(a, 2.0, name="b")
    c = tf.abs(b, name="ab")
    opts = tf.RunOptions()
    _watch(opts, "b", ["DebugIdentity", "DebugNumericSummary"], root)
    with tf.Session() as s:
        s.run(c, feed_dict={a: [1.0, 2.0]}, options=opts)
    names, stamps = _listing(root)
    (graph_file,) = [n for n in names if "_tfdbg_graph_hash" in n]
    ev = _event(root, graph_file, stamps)
    gd = GraphDef.FromString(ev.graph_def)
    nodes = {n.name: n for n in gd.node}
    dbg = nodes["__dbg_b:0_1_DebugNumericSummary"]
    assert dbg.op == "DebugNumericSummary" and list(dbg.input) == ["b"]
    assert dbg.attr["tensor_name"].s == b"b:0" and dbg.attr["device_name"].s == _CPU.encode()
    assert list(dbg.attr["debug_urls"].list.s) == [f"file://{root}".encode()]
    assert nodes["__dbg_b:0_0_DebugIdentity"].op == "DebugIdentity"
    # The watched value's consumer waits for the debug ops; feeds and fetches are TF's
    # _Arg and _Retval nodes.
    assert sorted(nodes["ab"].input) == [
        "^__dbg_b:0_0_DebugIdentity",
        "^__dbg_b:0_1_DebugNumericSummary",
        "b",
    ]
    assert nodes["b"].input[0] == "_arg_a_0_0" and nodes["_arg_a_0_0"].op == "_Arg"
    assert nodes["_retval_ab_0_0"].op == "_Retval"


def test_layout_of_scoped_nodes_slots_and_steps(tmp_path, on_cpu):
    root = str(tmp_path)
    with tf.name_scope("scope"):
        a = tf.placeholder(tf.int32, [None], name="a")
        u, idx = tf.unique(a, name="uniq")
        v = tf.Variable(tf.constant([1.0, 2.0]), name="v")
        s_ = tf.reduce_sum(v, name="s")
        w = tf.assign_add(v, [1.0, 1.0], name="w")
    opts = tf.RunOptions()
    opts.debug_options.global_step = 7
    _watch(opts, "scope/uniq", ["DebugIdentity"], root)
    _watch(opts, "scope/uniq", ["DebugIdentity", "DebugNumericSummary"], root, slot=1)
    for node, ops in [
        ("scope/s", ["DebugIdentity"]),
        ("scope/a", ["DebugIdentity"]),  # fed: not run, not dumped
        ("scope/v", ["DebugIdentity"]),
        ("scope/w", ["DebugNumericSummary"]),
        ("missing", ["DebugIdentity"]),  # no such node: nothing, no error
    ]:
        _watch(opts, node, ops, root)
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run([u, idx, s_], feed_dict={a: [3, 1, 3, 2]}, options=opts)
        assert sess.run(w, options=opts).tolist() == [2.0, 3.0]
    names, stamps = _listing(root)
    dumps = [n for n in names if "_tfdbg_" not in n.rpartition("/")[2]]
    # (TF 2.21's files; in the second run v's value is dumped before w updates it)
    assert sorted(n.partition("/")[2] for n in dumps) == [
        "scope/s_0_DebugIdentity",
        "scope/uniq_0_DebugIdentity",
        "scope/uniq_1_DebugIdentity",
        "scope/uniq_1_DebugNumericSummary",
        "scope/v_0_DebugIdentity",  # (both runs read v)
        "scope/v_0_DebugIdentity",
        "scope/w_0_DebugNumericSummary",
    ]
    assert [n for n in names if n.startswith("_tfdbg_core")] == [
        "_tfdbg_core_metadata_sessionrun00000000000002",
        "_tfdbg_core_metadata_sessionrun00000000000003",
    ]
    assert sum("_tfdbg_graph_hash" in n for n in names) == 2  # (one per plan)
    meta = json.loads(_event(root, names[0], stamps).log_message.message)
    assert meta == {
        "global_step": 7,
        "session_run_index": 2,
        "executor_step_index": 0,
        "input_names": ["scope/a:0"],
        "output_names": ["scope/s:0", "scope/uniq:0", "scope/uniq:1"],
        "target_nodes": [],
    }
    summary = _event(root, f"{_CPU_DIR}/scope/uniq_1_DebugNumericSummary", stamps)
    _same(
        np.frombuffer(summary.summary.value[0].tensor.tensor_content, "<f8"),
        [1, 4, 0, 0, 0, 2, 2, 0, 0, 2, 0.75, 0.6875, 3, 1, 4],
    )
    v_dump = _event(root, f"{_CPU_DIR}/scope/v_0_DebugIdentity", stamps)
    assert np.frombuffer(v_dump.summary.value[0].tensor.tensor_content, "<f4").tolist() == [
        1.0,
        2.0,
    ]


def test_repeated_runs_count_steps_and_write_the_graph_once(tmp_path, on_cpu):
    root = str(tmp_path)
    a = tf.placeholder(tf.float32, [3], name="a")
    b = tf.multiply(a, 2.0, name="b")
    opts = tf.RunOptions()
    _watch(opts, "b", ["DebugIdentity"], root)
    with tf.Session() as s:
        s.run(b, feed_dict={a: [1, 2, 3]})  # (no options: counted, nothing written)
        s.run(b, feed_dict={a: [1, 2, 3]}, options=opts)
        s.run(b, feed_dict={a: [4, 5, 6]}, options=opts)
        s.run([b, b.op], feed_dict={a: [1, 2, 3]}, options=opts)
    names, stamps = _listing(root)
    metas = [
        json.loads(_event(root, n, stamps).log_message.message)
        for n in names
        if n.startswith("_tfdbg_core")
    ]
    # (TF 2.21: session_run_index counts every run; executor_step_index the plan's)
    assert [(m["session_run_index"], m["executor_step_index"]) for m in metas] == [
        (2, 0),
        (3, 1),
        (4, 0),
    ]
    assert metas[2]["target_nodes"] == ["b"] and metas[2]["output_names"] == ["b:0"]
    assert sum("_tfdbg_graph_hash" in n for n in names) == 2
    # Three dumps of b (one file each: the names differ only in their timestamps).
    files = os.listdir(os.path.join(root, _CPU_DIR))
    assert (
        sorted(f.rpartition("_")[0] for f in files if not f.startswith("_tfdbg"))
        == ["b_0_DebugIdentity"] * 3
    )


def test_watch_errors_as_tf(tmp_path, on_cpu):
    a = tf.placeholder(tf.float32, [2], name="a")
    b = tf.multiply(a, 2.0, name="b")

    def run(root, slot=0, ops=("DebugFoo",), tolerate=False):
        opts = tf.RunOptions()
        w = opts.debug_options.debug_tensor_watch_opts.add(node_name="b", output_slot=slot)
        w.debug_ops.extend(ops)
        w.debug_urls.append("file://" + str(tmp_path / root))
        w.tolerate_debug_op_creation_failures = tolerate
        with tf.Session() as s:
            return s.run(b, feed_dict={a: [1, 2]}, options=opts).tolist()

    # (TF 2.21's error; tolerated, the unknown op is left out; a slot the node lacks
    # is not watched, yet the run still writes its metadata)
    with pytest.raises(errors.FailedPreconditionError) as e:
        run("e0")
    assert str(e.value).startswith(
        "Failed to create debug node DebugFoo for tensor b:0, due to: Failed to create node "
        "definition for debug op DebugFoo on watched tensor b:0"
    )
    assert run("e1", ops=("DebugFoo", "DebugIdentity"), tolerate=True) == [2.0, 4.0]
    assert run("e2", slot=3, ops=("DebugIdentity",)) == [2.0, 4.0]
    names1 = _listing(str(tmp_path / "e1"))[0]
    names2 = _listing(str(tmp_path / "e2"))[0]
    assert len(names1) == 3 and "_tfdbg_graph_hash" in names1[1]
    assert names1[2] == f"{_CPU_DIR}/b_0_DebugIdentity"
    assert len(names2) == 2 and "_tfdbg_graph_hash" in names2[1]


def test_no_debug_options_no_debug_plan():
    a = tf.placeholder(tf.float32, [3], name="a")
    b = tf.multiply(a, 2.0, name="b")
    with tf.Session() as s:
        s.run(b, feed_dict={a: [1, 2, 3]}, options=tf.RunOptions())
        assert all(p.debug is None for p in s._master.plans.values())
        assert all(
            "Debug" not in op.type for p in s._master.plans.values() for op in p.plans[0].nodes
        )


def test_raw_debug_ops_dump_where_tf_does(tmp_path, on_cpu):
    root = str(tmp_path)
    url = ["file://" + root]
    x = tf.constant([1.0, 2.0], name="x")
    ops = [
        R.DebugIdentity(input=x, tensor_name="x:0", debug_urls=url),
        R.DebugIdentityV3(
            input=x, tensor_name="x:0", debug_urls=url, io_of_node="foo", io_index=1
        ),  # fmt: skip
        R.DebugNumericSummary(
            input=x,
            tensor_name="sc/x:1",
            debug_urls=url,
            device_name="/job:w/replica:0/task:1/device:CPU:0",
            mute_if_healthy=True,
        ),  # (healthy: no file)  # fmt: skip
        R.DebugNumericSummary(input=x, tensor_name="sc/y:0", debug_urls=url, lower_bound=1.0),
    ]
    with tf.Session() as s:
        for op in ops:
            s.run(op)
    names, stamps = _listing(root)
    # (TF 2.21's files: no device_name attr dumps under "_tfdbg_device_"; V3's node-io
    # layout names the step, here the session's second)
    assert names == [
        "_tfdbg_device_/sc/y_0_DebugNumericSummary",
        "_tfdbg_device_/x_0_DebugIdentity",
        "node-io-dump/step-2/foo:out:1",
    ]
    v3 = _event(root, names[2], stamps).summary.value[0]
    assert v3.node_name == "x:0:DebugIdentityV3"
    assert json.loads(v3.metadata.plugin_data.content)["device"] == ""
    summary = _event(root, names[0], stamps).summary.value[0].tensor
    _same(
        np.frombuffer(summary.tensor_content, "<f8"),
        [1, 2, 0, 1, 0, 0, 1, 0, 1, 2, 1.5, 0.25, 1, 1, 2],
    )


# -- tfdbg2: tf.debugging.experimental.enable_dump_debug_info ------------------------------

_KINDS = ["execution", "graph_execution_traces", "graphs", "metadata", "source_files",
          "stack_frames"]  # fmt: skip


@pytest.fixture
def dumping():
    yield tf.debugging.experimental
    tf.debugging.experimental.disable_dump_debug_info()


def _events(root, kind):
    (path,) = glob.glob(os.path.join(root, f"*.{kind}"))
    return [DebugEvent.FromString(r) for r in tf.python_io.tf_record_iterator(path)]


def _traces(root):
    out = []
    for e in _events(root, "graph_execution_traces"):
        t = e.graph_execution_trace
        value = tensor_from_proto(t.tensor_proto) if t.HasField("tensor_proto") else None
        out.append((t.op_name, t.output_slot, t.tensor_debug_mode, value))
    return out


def _abs_graph(dbg, root, mode, **kw):
    dbg.enable_dump_debug_info(root, tensor_debug_mode=mode, circular_buffer_size=-1, **kw)
    a = tf.placeholder(tf.float32, [3], name="a")
    b = tf.multiply(a, 2.0, name="b")
    c = tf.reduce_sum(tf.abs(b, name="ab"), name="c")
    with tf.Session() as s:
        first = s.run(c, feed_dict={a: [1.0, NAN, -3.0]})
        second = s.run(c, feed_dict={a: [1.0, 2.0, -3.0]})
    dbg.disable_dump_debug_info()
    assert math.isnan(first) and second == 12.0


def _as_set(traces):
    return sorted((n, s, m, repr(np.asarray(v, np.float64).tolist())) for n, s, m, v in traces)


def test_dump_files_and_records_as_tf(tmp_path, on_cpu, dumping):
    root = str(tmp_path)
    _abs_graph(dumping, root, "FULL_HEALTH")
    names = sorted(os.listdir(root))
    assert [n.rpartition(".")[2] for n in names] == _KINDS
    assert len({n.rpartition(".")[0] for n in names}) == 1
    assert re.fullmatch(r"tfdbg_events\.\d+\.[^.]+", names[0].rpartition(".")[0])
    (meta,) = _events(root, "metadata")
    assert meta.debug_metadata.file_version == "debug.Event:1"
    assert len(meta.debug_metadata.tfdbg_run_id) == 8
    assert _events(root, "execution") == []
    graphs = _events(root, "graphs")
    assert graphs[0].WhichOneof("what") == "debugged_graph"
    gid = graphs[0].debugged_graph.graph_id
    # (TF 2.21's .graphs for the same program)
    assert [
        (g.op_type, g.op_name, list(g.input_names), g.num_outputs, list(g.output_tensor_ids))
        for g in (e.graph_op_creation for e in graphs[1:])
    ] == [
        ("Placeholder", "a", [], 1, [1]),
        ("Const", "b/y", [], 1, [2]),
        ("Mul", "b", ["a:0", "b/y:0"], 1, [3]),
        ("Abs", "ab", ["b:0"], 1, [4]),
        ("Const", "Const", [], 1, [5]),
        ("Sum", "c", ["ab:0", "Const:0"], 1, [6]),
    ]
    assert all(e.graph_op_creation.graph_id == gid for e in graphs[1:])
    # Where each op was made: the stack frames name this file, whose lines are in the
    # .source_files file.
    files = [e.source_file.file_path for e in _events(root, "source_files")]
    frames = {
        e.stack_frame_with_id.id: e.stack_frame_with_id for e in _events(root, "stack_frames")
    }
    mul = graphs[3].graph_op_creation
    made_at = [frames[i].file_line_col for i in mul.code_location.stack_frame_ids]
    assert any(files[f.file_index] == __file__ and f.func == "_abs_graph" for f in made_at)
    here = next(
        e.source_file for e in _events(root, "source_files") if e.source_file.file_path == __file__
    )
    assert "def _abs_graph(dbg, root, mode, **kw):" in here.lines
    traces = _events(root, "graph_execution_traces")
    assert {e.graph_execution_trace.tfdbg_context_id for e in traces} == {gid}
    assert {e.graph_execution_trace.device_name for e in traces} == {_CPU}
    h = [1, 1, 3]  # (dtype enum, rank, size)
    b_y = ("b/y", 0, 4, [2, -1, 1, 0, 1, 0, 0, 0, 0, 0, 1])
    assert _as_set(_traces(root)) == _as_set(
        [("a", 0, 4, [1, -1, *h, 0, 0, 1, 1, 0, 1]), ("a", 0, 4, [1, -1, *h, 0, 0, 0, 1, 0, 2]),
         ("b", 0, 4, [3, -1, *h, 0, 0, 1, 1, 0, 1]), ("b", 0, 4, [3, -1, *h, 0, 0, 0, 1, 0, 2]),
         ("ab", 0, 4, [4, -1, *h, 0, 0, 1, 0, 0, 2]),
         ("ab", 0, 4, [4, -1, *h, 0, 0, 0, 0, 0, 3]),
         ("c", 0, 4, [6, -1, 1, 0, 1, 0, 0, 1, 0, 0, 0]),
         ("c", 0, 4, [6, -1, 1, 0, 1, 0, 0, 0, 0, 0, 1]), b_y, b_y]
    )  # fmt: skip


# (mode, TF 2.21's traces of _abs_graph's two runs: op, mode, value)
_MODE_TRACES = {
    "NO_TENSOR": [(op, 1, []) for op in ("a", "b/y", "b", "ab", "Const", "c")] * 2,
    "CURT_HEALTH": [("a", 2, [1, 1]), ("a", 2, [1, 0]), ("b", 2, [3, 1]), ("b", 2, [3, 0]),
                    ("ab", 2, [4, 1]), ("ab", 2, [4, 0]), ("c", 2, [6, 1]), ("c", 2, [6, 0])]
    + [("b/y", 2, [2, 0])] * 2,
    "CONCISE_HEALTH": [("a", 3, [1, 3, 0, 0, 1]), ("a", 3, [1, 3, 0, 0, 0]),
                       ("b", 3, [3, 3, 0, 0, 1]), ("b", 3, [3, 3, 0, 0, 0]),
                       ("ab", 3, [4, 3, 0, 0, 1]), ("ab", 3, [4, 3, 0, 0, 0]),
                       ("c", 3, [6, 1, 0, 0, 1]), ("c", 3, [6, 1, 0, 0, 0])]
    + [("b/y", 3, [2, 1, 0, 0, 0])] * 2,
    "SHAPE": [("a", 5, [1, 1, 1, 3, 3, 0, 0, 0, 0, 0]), ("b/y", 5, [2, 1, 0, 1, 0, 0, 0, 0, 0, 0]),
              ("b", 5, [3, 1, 1, 3, 3, 0, 0, 0, 0, 0]), ("ab", 5, [4, 1, 1, 3, 3, 0, 0, 0, 0, 0]),
              ("Const", 5, [5, 3, 1, 1, 1, 0, 0, 0, 0, 0]),
              ("c", 5, [6, 1, 0, 1, 0, 0, 0, 0, 0, 0])] * 2,
    "FULL_TENSOR": [("a", 7, [1, NAN, -3]), ("a", 7, [1, 2, -3]), ("b", 7, [2, NAN, -6]),
                    ("b", 7, [2, 4, -6]), ("ab", 7, [2, NAN, 6]), ("ab", 7, [2, 4, 6]),
                    ("c", 7, NAN), ("c", 7, 12.0)]
    + [("b/y", 7, 2.0), ("Const", 7, [0])] * 2,
}  # fmt: skip


@pytest.mark.parametrize("mode", sorted(_MODE_TRACES))
def test_tensor_debug_modes_trace_what_tf_traces(tmp_path, on_cpu, dumping, mode):
    _abs_graph(dumping, str(tmp_path), mode)
    want = [(op, 0, m, v) for op, m, v in _MODE_TRACES[mode]]
    got = _traces(str(tmp_path))
    assert _as_set(got) == _as_set(want)
    if mode == "FULL_TENSOR":  # (the values themselves, in their dtypes)
        assert {v.dtype.name for _, _, _, v in got} == {"float32", "int32"}
    else:
        assert {v.dtype.name for _, _, _, v in got} == {
            "float64" if mode != "NO_TENSOR" else "float32"
        }


def test_instrumented_graph_as_tf_builds_it(dumping, tmp_path):
    dumping.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH")
    a = tf.placeholder(tf.float32, [3], name="a")
    with tf.name_scope("sc"):
        b = tf.multiply(a, 2.0, name="b")
    tf.reduce_sum(tf.abs(b, name="ab"), name="c")
    got = [
        (op.name, op.type, [t.name for t in op.inputs], [o.name for o in op.control_inputs])
        for op in tf.get_default_graph().get_operations()
    ]
    # (TF 2.21's graph; TF's builders also return the Identity, here the op's output)
    assert got == [
        ("a", "Placeholder", [], []),
        ("a/DebugNumericSummaryV2", "DebugNumericSummaryV2", ["a:0"], []),
        ("a/DebugIdentityV2_1", "DebugIdentityV2", ["a/DebugNumericSummaryV2:0"], []),
        ("sc/b/y", "Const", [], []),
        ("sc/b/DebugNumericSummaryV2", "DebugNumericSummaryV2", ["sc/b/y:0"], []),
        ("sc/b/DebugIdentityV2_2", "DebugIdentityV2", ["sc/b/DebugNumericSummaryV2:0"], []),
        ("sc/b/tfdbg_identity_2", "Identity", ["sc/b/y:0"], ["sc/b/DebugIdentityV2_2"]),
        ("sc/b", "Mul", ["a:0", "sc/b/tfdbg_identity_2:0"], ["a/DebugIdentityV2_1"]),
        ("sc/b/DebugNumericSummaryV2_1", "DebugNumericSummaryV2", ["sc/b:0"], []),
        ("sc/b/DebugIdentityV2_3", "DebugIdentityV2", ["sc/b/DebugNumericSummaryV2_1:0"], []),
        ("sc/b/tfdbg_identity_3", "Identity", ["sc/b:0"], ["sc/b/DebugIdentityV2_3"]),
        ("ab", "Abs", ["sc/b/tfdbg_identity_3:0"], []),
        ("ab/DebugNumericSummaryV2", "DebugNumericSummaryV2", ["ab:0"], []),
        ("ab/DebugIdentityV2_4", "DebugIdentityV2", ["ab/DebugNumericSummaryV2:0"], []),
        ("ab/tfdbg_identity_4", "Identity", ["ab:0"], ["ab/DebugIdentityV2_4"]),
        ("Const", "Const", [], []),
        ("c", "Sum", ["ab/tfdbg_identity_4:0", "Const:0"], []),
        ("c/DebugNumericSummaryV2", "DebugNumericSummaryV2", ["c:0"], []),
        ("c/DebugIdentityV2_6", "DebugIdentityV2", ["c/DebugNumericSummaryV2:0"], []),
        ("c/tfdbg_identity_6", "Identity", ["c:0"], ["c/DebugIdentityV2_6"]),
    ]


def test_filters_ring_and_flush(tmp_path, dumping):
    root = str(tmp_path / "f")
    dumping.enable_dump_debug_info(
        root, tensor_debug_mode="CURT_HEALTH", op_regex="(Mul|Sum)", tensor_dtypes=[tf.float32]
    )
    a = tf.placeholder(tf.float32, [3], name="a")
    b = tf.multiply(a, 2.0, name="b")
    i = tf.multiply(tf.constant([1, 2]), 3, name="i")
    c = tf.reduce_sum(b, name="c")
    with tf.Session() as s:
        assert s.run([c, i], feed_dict={a: [1, 2, 3]})[0] == 12.0
    # (TF 2.21: traces stay in memory until flushed)
    assert os.path.getsize(glob.glob(root + "/*.graph_execution_traces")[0]) == 0
    dumping.disable_dump_debug_info()
    assert _as_set(_traces(root)) == _as_set([("b", 0, 2, [3, 0]), ("c", 0, 2, [8, 0])])
    # A ring of two keeps the last two traces.
    root = str(tmp_path / "r")
    dumping.enable_dump_debug_info(root, tensor_debug_mode="FULL_TENSOR", circular_buffer_size=2)
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [], name="a")
        c = tf.square(tf.square(a, name="b"), name="c")
        with tf.Session() as s:
            assert s.run(c, feed_dict={a: 2.0}) == 16.0
    dumping.disable_dump_debug_info()
    assert [(n, v.tolist()) for n, _, _, v in _traces(root)] == [("b", 4.0), ("c", 16.0)]


def test_enable_errors_as_tf(tmp_path, dumping):
    names = ["UNSPECIFIED", "NO_TENSOR", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH",
             "SHAPE", "FULL_NUMERICS", "FULL_TENSOR", "REDUCE_INF_NAN_THREE_SLOTS"]  # fmt: skip
    for bad in ("BOGUS", "full_health"):  # (case matters)
        with pytest.raises(ValueError) as e:
            dumping.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=bad)
        assert str(e.value) == (
            f"Invalid value in tensor_debug_mode ('{bad}'). Valid options are: {names}"
        )
    with pytest.raises(NotImplementedError, match="FULL_NUMERICS is not implemented yet"):
        dumping.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_NUMERICS")
    with pytest.raises(ValueError, match="tensor_dtypes is expected to be a list, a tuple"):
        dumping.enable_dump_debug_info(str(tmp_path), tensor_dtypes="float32")
    dumping.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=5)
    with pytest.raises(ValueError) as e:
        dumping.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="SHAPE")
    assert str(e.value) == (
        "There is already a dumping callback configured with a different circular-buffer "
        "size (5). Therefore the newly request circular-buffer size (1000) will not be "
        "honored."
    )
    dumping.disable_dump_debug_info()
    dumping.disable_dump_debug_info()  # (a second time does nothing)
    tf.constant(1.0)  # (not recorded: the callback is gone)
    assert len(_events(str(tmp_path), "graphs")) == 0


def test_ops_other_callbacks_make_are_not_recorded(tmp_path, dumping):
    root = str(tmp_path)
    dumping.enable_dump_debug_info(root, tensor_debug_mode="CURT_HEALTH")
    tf.debugging.enable_check_numerics()
    try:
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.log(x, name="y")
        with tf.Session() as s:
            s.run(y, feed_dict={x: [1.0, 2.0]})
            with pytest.raises(errors.InvalidArgumentError):
                s.run(y, feed_dict={x: [0.0, 2.0]})
    finally:
        tf.debugging.disable_check_numerics()
    dumping.disable_dump_debug_info()
    # (TF 2.21: enable_check_numerics' CheckNumericsV2 ops are not in the .graphs file)
    made = [e.graph_op_creation for e in _events(root, "graphs")[1:]]
    assert [(g.op_type, g.op_name, list(g.output_tensor_ids)) for g in made] == [
        ("Placeholder", "x", [1]),
        ("Log", "y", [2]),
    ]
    assert _as_set(_traces(root)) == _as_set(
        [("x", 0, 2, [1, 0]), ("x", 0, 2, [1, 0]), ("y", 0, 2, [2, 0]), ("y", 0, 2, [2, 1])]
    )
