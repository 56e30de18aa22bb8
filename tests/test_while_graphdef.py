"""GraphDefs holding while loops import and run: TF1's control flow v1 (Enter, Merge,
Switch, LoopCond, NextIteration, Exit), whose NextIteration -> Merge back edges make the
GraphDef cyclic, as TF's importer resolves them.  MetaGraphs carry the loops' and conds'
contexts (WhileContextDef / CondContextDef), so a restored model trains: TF's here, ours
in TF (the recorder checks that and records TF's losses).

fixtures/while_graphdef/ is recorded by fixtures/record_while_graphdef_tf.py with TF 2.21
(tf.compat.v1, control flow v1); these tests read only the fixtures.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops import control_flow_contexts as cfc
from asyncflow.protos import GraphDef, MetaGraphDef
from asyncflow.protos.control_flow_pb2 import CondContextDef, WhileContextDef

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
import while_graphdef_cases as cases  # noqa: E402

pytestmark = pytest.mark.timeout(60)

HERE = pathlib.Path(__file__).parent / "fixtures" / "while_graphdef"
EXPECTED = json.loads((HERE / "expected.json").read_text())
FEEDS = EXPECTED["feeds"]


def _feed_dict(prefix: str = "") -> dict:
    return {
        f"{prefix}x:0": np.array(FEEDS["x"], np.float32),
        f"{prefix}n:0": np.int32(FEEDS["n"]),
        f"{prefix}seq:0": np.array(FEEDS["seq"], np.float32),
    }


def _v1_loops() -> GraphDef:
    return GraphDef.FromString((HERE / "v1_loops.pb").read_bytes())


# -- TF's graphs -------------------------------------------------------------------------


def test_fixture_holds_v1_control_flow():
    ops = set(EXPECTED["v1_loops"]["ops"])
    assert {"Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit"} <= ops
    assert {"RefEnter", "TensorArrayV3", "TensorArrayWriteV3", "TensorArrayScatterV3"} <= ops
    assert {nd.op for nd in _v1_loops().node} == ops


@pytest.mark.parametrize("fetch", ["count", "acc", "nested", "cond_loop", "rnn_out", "rnn_h"])
def test_tf_loops_run_as_tf(fetch):
    with af.Graph().as_default():
        af.import_graph_def(_v1_loops(), name="")
        with af.Session() as sess:
            sess.run("init")
            got = sess.run(f"{fetch}:0", _feed_dict())
    want = np.asarray(EXPECTED["v1_loops"][fetch])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.asarray(got).dtype == (np.int32 if fetch == "count" else np.float32)


def test_loop_with_stateful_body_runs_each_iteration():
    """A RefEnter'ed variable that the body assign_adds: every iteration's update lands."""
    with af.Graph().as_default():
        af.import_graph_def(_v1_loops(), name="imp")
        with af.Session() as sess:
            sess.run("imp/init")
            assert sess.run("imp/bumps:0") == EXPECTED["v1_loops"]["bumps"]
            assert sess.run("imp/bumps:0") == 2 * EXPECTED["v1_loops"]["bumps"]


def test_imported_loop_back_edges_close():
    with af.Graph().as_default() as g:
        af.import_graph_def(_v1_loops(), name="")
    merges = [op for op in g.get_operations() if op.type == "Merge" and "while" in op.name]
    assert merges
    loop_merges = [m for m in merges if any(t.op.type == "NextIteration" for t in m.inputs)]
    # every loop Merge takes its Enter and its NextIteration, as in the GraphDef
    by_name = {nd.name: nd for nd in _v1_loops().node}
    for m in loop_merges:
        assert [t.op.name for t in m.inputs] == [s.split(":")[0] for s in by_name[m.name].input]
        assert {t.op.type for t in m.inputs} == {"Enter", "NextIteration"}
    # the variable passed by RefEnter stays a reference in the loop
    ref_enters = [n.name for n in _v1_loops().node if n.op == "RefEnter"]
    assert all(g.get_operation_by_name(n).outputs[0]._is_ref for n in ref_enters)


def test_input_map_into_a_loop():
    with af.Graph().as_default():
        n = af.constant(2)
        (acc,) = af.import_graph_def(
            _v1_loops(), input_map={"n:0": n}, return_elements=["acc:0"], name="m"
        )
        with af.Session() as sess:
            got = sess.run(acc, {"m/x:0": np.array(FEEDS["x"], np.float32)})
    x = np.array(FEEDS["x"], np.float32)
    np.testing.assert_allclose(got, (0 * x + 0) * x + 1, rtol=1e-6)


# -- our graphs ----------------------------------------------------------------------------


def _round_trip(build):
    """Build with `build()` (returning fetch names), export, import into a new graph
    and run both; returns (original values, imported values)."""
    with af.Graph().as_default() as g:
        fetches = build()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            before = sess.run(fetches)
        gd = g.as_graph_def()
    with af.Graph().as_default():
        af.import_graph_def(gd, name="")
        with af.Session() as sess:
            if any(nd.op == "VariableV2" for nd in gd.node):
                sess.run("init")
            after = sess.run([f.name if hasattr(f, "name") else f for f in fetches])
    return before, after


def test_own_while_loop_round_trips():
    def build():
        i = af.constant(0)
        return [af.while_loop(lambda i: i < 10, lambda i: i + 1, [i])]

    before, after = _round_trip(build)
    assert before == after == [10]


def test_own_nested_loop_with_cond_round_trips():
    def build():
        x = af.constant([1.0, 2.0])

        def outer(i, s):
            def inner(j, s):
                step = af.cond(j > i, lambda: s * 0.5, lambda: s + x)
                return j + 1, step

            return i + 1, af.while_loop(lambda j, s: j < 3, inner, [0, s])[1]

        out = af.while_loop(lambda i, s: i < 4, outer, [0, af.zeros([2])])[1]
        v = af.Variable(1.0, name="v")
        bumped = af.while_loop(
            lambda k: k < 3,
            lambda k: af.tuple([k + 1], control_inputs=[v.assign_add(2.0)])[0],
            [0],
        )
        with af.control_dependencies([bumped]):
            read = af.identity(v.read_value())
        af.group(af.global_variables_initializer(), name="init")
        return [out, read]

    before, after = _round_trip(build)
    np.testing.assert_allclose(after[0], before[0])
    assert after[1] == before[1] == 7.0


# -- bad cycles stay errors ------------------------------------------------------------


def _node(gd, name, op, inputs, **type_attrs):
    nd = gd.node.add(name=name, op=op)
    nd.input.extend(inputs)
    for key, enum in type_attrs.items():
        nd.attr[key].type = enum
    return nd


def _const(gd, name, value=1.0):
    nd = _node(gd, name, "Const", [], dtype=1)
    nd.attr["value"].tensor.dtype = 1
    nd.attr["value"].tensor.float_val.append(value)
    return nd


def test_cycle_without_a_loop_is_an_error_naming_its_nodes():
    gd = GraphDef()
    _const(gd, "c")
    _node(gd, "a", "AddV2", ["c", "b"], T=1)
    _node(gd, "b", "AddV2", ["a", "c"], T=1)
    with af.Graph().as_default() as g:
        with pytest.raises(ValueError, match=r"cycle through nodes \['a', 'b'\]"):
            af.import_graph_def(gd, name="")
        assert g.get_operations() == []


def test_cycle_into_a_merge_not_from_next_iteration_is_an_error():
    gd = GraphDef()
    _const(gd, "c")
    m = _node(gd, "m", "Merge", ["c", "back"], T=1)
    m.attr["N"].i = 2
    _node(gd, "back", "Identity", ["m"], T=1)
    with af.Graph().as_default(), pytest.raises(ValueError, match=r"cycle.*'back', 'm'"):
        af.import_graph_def(gd, name="")


def test_merge_fed_only_by_next_iterations_is_an_error():
    gd = GraphDef()
    m = _node(gd, "m", "Merge", ["nxt", "nxt"], T=1)
    m.attr["N"].i = 2
    _node(gd, "nxt", "NextIteration", ["m"], T=1)
    with af.Graph().as_default(), pytest.raises(ValueError, match=r"cycle.*'m', 'nxt'"):
        af.import_graph_def(gd, name="")


def test_back_edge_of_another_dtype_is_an_error_and_rolls_back():
    gd = GraphDef()
    _const(gd, "c")
    e = _node(gd, "e", "Enter", ["c"], T=1)
    e.attr["frame_name"].s = b"f"
    m = _node(gd, "m", "Merge", ["e", "nxt"], T=1)
    m.attr["N"].i = 2
    _node(gd, "cast", "Cast", ["m"], SrcT=1, DstT=3)
    _node(gd, "nxt", "NextIteration", ["cast"], T=3)
    with af.Graph().as_default() as g:
        with pytest.raises(ValueError, match="Node 'm'.*int32"):
            af.import_graph_def(gd, name="")
        assert g.get_operations() == []


# -- MetaGraphs: control-flow contexts, and gradients through imported loops ------------

RNN = EXPECTED["rnn_train"]
OURS_IN_TF = EXPECTED["ours_in_tf"]
RNN_PREFIX = str(HERE / "rnn_meta" / "model-0")


def _train_imported(meta, prefix, feeds, lr, flags, import_scope=None):
    """Import `meta` into a new graph, restore `prefix`, minimize the "loss" collection's
    tensor with GradientDescent; the losses of the steps (`flags`: use_l1 per step)."""
    with af.Graph().as_default() as g:
        saver = af.train.import_meta_graph(meta, import_scope=import_scope)
        loss = g.get_collection("loss")[0]
        train = af.train.GradientDescentOptimizer(lr).minimize(loss)
        with af.Session() as sess:
            saver.restore(sess, prefix)
            losses = []
            for flag in flags:
                fd = dict(feeds)
                if flag is not None:
                    fd[loss.name.replace("loss:0", "use_l1:0")] = flag
                losses.append(float(sess.run([loss, train], fd)[0]))
    return g, losses


def test_tf_meta_graph_holds_contexts():
    assert {"while_context", "cond_context"} <= set(RNN["collections"])
    with af.Graph().as_default() as g:
        af.train.import_meta_graph(RNN_PREFIX + ".meta")
    (loop,) = g.get_collection("while_context")
    conds = g.get_collection("cond_context")
    assert isinstance(loop, cfc.WhileContext) and loop.name == "rnn/while/while_context"
    assert [c.name for c in conds] == ["cond/cond_text", "cond/cond_text_1"]
    assert [c.branch for c in conds] == [1, 0]
    assert loop.pivot.op.type == "LoopCond" and loop.maximum_iterations is not None
    assert all(t.op.type == "Exit" for t in loop.loop_exits)
    assert all(t.op.type == "Enter" for t in loop.loop_enters)
    # every op of the loop's body is back in the loop's context
    matmul = next(op for op in g.get_operations() if op.type == "MatMul")
    assert matmul._control_flow_context is loop
    assert g.get_operation_by_name("cond/Abs")._control_flow_context is conds[0]


def test_restored_tf_dynamic_rnn_trains_as_tf():
    """TF1's flow: import a dynamic_rnn MetaGraph, restore, minimize: the gradient goes
    through the imported while loop (TensorArrays) and the imported cond."""
    feeds = {
        "seq:0": np.array(FEEDS["seq"], np.float32),
        "target:0": np.array(RNN["target"], np.float32),
    }
    _, losses = _train_imported(RNN_PREFIX + ".meta", RNN_PREFIX, feeds, RNN["lr"], RNN["use_l1"])
    np.testing.assert_allclose(losses, RNN["losses"], rtol=2e-5)
    assert losses[-1] < losses[0]


def test_restored_tf_dynamic_rnn_trains_under_an_import_scope():
    feeds = {
        "scoped/seq:0": np.array(FEEDS["seq"], np.float32),
        "scoped/target:0": np.array(RNN["target"], np.float32),
    }
    g, losses = _train_imported(
        RNN_PREFIX + ".meta", RNN_PREFIX, feeds, RNN["lr"], RNN["use_l1"], "scoped"
    )
    np.testing.assert_allclose(losses, RNN["losses"], rtol=2e-5)
    assert g.get_collection("while_context")[0].name == "scoped/rnn/while/while_context"


def _our_meta(tmp_path):
    cases.write_ours(str(tmp_path))
    return str(tmp_path / "ours-0")


def test_our_meta_graph_writes_while_context_with_nested_cond(tmp_path):
    prefix = _our_meta(tmp_path)
    mg = MetaGraphDef.FromString(pathlib.Path(prefix + ".meta").read_bytes())
    assert sorted(mg.collection_def) == OURS_IN_TF["collections"]
    (raw,) = mg.collection_def["while_context"].bytes_list.value
    w = WhileContextDef.FromString(raw)
    assert w.context_name == "loop/while_context"
    assert w.pivot_name == "loop/LoopCond:0" and w.back_prop and w.parallel_iterations == 10
    assert len(w.loop_exit_names) == len(w.loop_enter_names) == 2
    assert [n.WhichOneof("ctxt") for n in w.nested_contexts] == ["cond_ctxt", "cond_ctxt"]
    assert sorted(n.cond_ctxt.branch for n in w.nested_contexts) == [0, 1]
    # the Enter of the variable's snapshot is external: w's read maps into the loop
    ext = dict(w.values_def.external_values)
    assert any(v.startswith("loop/") for v in ext.values()) and "x:0" in ext
    assert set(ext) <= set(w.values_def.values)
    names = {nd.name for nd in mg.graph_def.node}
    assert all(v.split(":")[0] in names for v in w.values_def.values)


def test_our_meta_graph_trains_here_as_in_tf(tmp_path):
    """TF imported this MetaGraph (the recorder), restored and trained it; so do we."""
    prefix = _our_meta(tmp_path)
    feeds = {"x:0": np.array(cases.X, np.float32)}
    _, losses = _train_imported(
        prefix + ".meta", prefix, feeds, cases.LEARNING_RATE, [None] * cases.STEPS
    )
    np.testing.assert_allclose(losses, OURS_IN_TF["losses"], rtol=2e-5)
    with af.Graph().as_default():  # and as the graph that was never exported
        loss, _ = cases.build_ours(af)
        train = af.train.GradientDescentOptimizer(cases.LEARNING_RATE).minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            direct = [float(sess.run([loss, train], feeds)[0]) for _ in range(cases.STEPS)]
    np.testing.assert_allclose(direct, OURS_IN_TF["losses"], rtol=2e-5)


def test_contexts_survive_a_second_round_trip(tmp_path):
    with af.Graph().as_default():
        af.train.import_meta_graph(RNN_PREFIX + ".meta")
        mg = af.train.export_meta_graph()
    original = MetaGraphDef.FromString((HERE / "rnn_meta" / "model-0.meta").read_bytes())
    for key, proto in (("while_context", WhileContextDef), ("cond_context", CondContextDef)):
        ours = [proto.FromString(b) for b in mg.collection_def[key].bytes_list.value]
        theirs = [proto.FromString(b) for b in original.collection_def[key].bytes_list.value]
        assert [o.context_name for o in ours] == [t.context_name for t in theirs]
        for o, t in zip(ours, theirs, strict=True):
            assert set(o.values_def.values) == set(t.values_def.values)
            assert dict(o.values_def.external_values) == dict(t.values_def.external_values)
            o.ClearField("values_def")
            t.ClearField("values_def")
            assert o == t


# -- control flow v2: If / While nodes lowered at import --------------------------------

V2 = EXPECTED["v2"]
FROZEN = EXPECTED["frozen"]


def _v2_loops() -> GraphDef:
    return GraphDef.FromString((HERE / "v2_loops.pb").read_bytes())


def test_fixture_holds_control_flow_v2():
    assert {"If", "StatelessIf", "While", "StatelessWhile"} <= set(V2["ops"])
    assert not {"Enter", "Merge", "Switch"} & set(V2["ops"])


@pytest.mark.parametrize("flag", [True, False])
def test_tf2_cond_and_while_run_as_tf(flag):
    want = V2[str(flag).lower()]
    with af.Graph().as_default():
        af.import_graph_def(_v2_loops(), name="")
        with af.Session() as sess:
            sess.run("init")
            feeds = {"x:0": np.array(FEEDS["x"], np.float32), "n:0": 4, "p:0": flag}
            fetches = ["cond_out", "count", "acc", "nested", "cond_loop", "grown"]
            got = sess.run([f + ":0" for f in fetches], feeds)
            for name, value in zip(fetches, got, strict=True):
                np.testing.assert_allclose(value, want[name], rtol=1e-6, err_msg=name)
            # a stateful If: the variable is assign_added only when its branch runs
            np.testing.assert_allclose(sess.run("bump:0", {"p:0": flag}), want["bump"])


def test_tf2_while_lowering_keeps_attrs():
    with af.Graph().as_default() as g:
        af.import_graph_def(_v2_loops(), name="")
    gd = _v2_loops()
    whiles = {nd.name: nd for nd in gd.node if nd.op in ("While", "StatelessWhile")}

    def source(name):  # the loop's output, through TF's Identities after it
        t = g.get_operation_by_name(name).inputs[0]
        while t.op.type == "Identity":
            t = t.op.inputs[0]
        return t

    acc_loop = source("acc").op
    assert acc_loop.type == "IdentityN" and acc_loop.name in whiles
    enter = g.get_operation_by_name(f"{acc_loop.name}/enter_0")
    assert enter.type == "Enter" and enter._attrs["parallel_iterations"] == 3
    assert enter._attrs["frame_name"] == acc_loop.name
    # output_shapes: the growing loop variable keeps TF's [None]
    grown = source("grown")
    assert grown.op.type == "IdentityN" and grown.shape.as_list() == [None]
    # a nested loop's frame is its own, inside the outer body
    frames = {op._attrs["frame_name"] for op in g.get_operations() if op.type == "Enter"}
    assert len(frames) == len(whiles) + sum(
        1 for f in gd.library.function for nd in f.node_def if nd.op.endswith("While")
    )


def test_frozen_tf_function_runs_as_tf():
    gd = GraphDef.FromString((HERE / "frozen_fn.pb").read_bytes())
    with af.Graph().as_default():
        af.import_graph_def(gd, name="")
        with af.Session() as sess:
            got = sess.run(FROZEN["output"], {FROZEN["input"]: np.array(FEEDS["x"], np.float32)})
    np.testing.assert_allclose(got, FROZEN["out"], rtol=1e-6)


def _first_node(gd, *types):
    return next(nd for nd in gd.node if nd.op in types)


def test_while_naming_a_missing_function_is_an_error():
    gd = _v2_loops()
    loop = _first_node(gd, "While", "StatelessWhile")
    loop.attr["body"].func.name = "no_such_body"
    with af.Graph().as_default() as g:
        with pytest.raises(ValueError, match=f"'{loop.name}'.*'no_such_body'.*not in the library"):
            af.import_graph_def(gd, name="")
        assert g.get_operations() == []


def test_if_with_inputs_not_matching_tin_is_an_error():
    gd = _v2_loops()
    node = _first_node(gd, "If", "StatelessIf")
    node.attr["Tin"].list.type.append(1)
    with af.Graph().as_default(), pytest.raises(ValueError, match=f"'{node.name}'.*inputs"):
        af.import_graph_def(gd, name="")


def test_restored_tf_training_graph_runs_its_own_train_op():
    """TF's saved training graph: its backprop loop (stacks pushed by the forward loop,
    popped by the gradient loop, TensorArray gradients) and Adam, run by name."""
    want = EXPECTED["rnn_train_op"]
    assert {"StackV2", "StackPushV2", "StackPopV2", "ApplyAdam"} <= set(want["ops"])
    prefix = str(HERE / "rnn_train_meta" / "model-0")
    feeds = {
        "seq:0": np.array(FEEDS["seq"], np.float32),
        "target:0": np.array(RNN["target"], np.float32),
    }
    with af.Graph().as_default():
        saver = af.train.import_meta_graph(prefix + ".meta")
        with af.Session() as sess:
            saver.restore(sess, prefix)
            losses = [
                float(sess.run(["loss:0", "train"], {**feeds, "use_l1:0": flag})[0])
                for flag in RNN["use_l1"]
            ]
    np.testing.assert_allclose(losses, want["losses"], rtol=2e-5)


def test_tf2_dynamic_rnn_with_tensor_lists_runs_as_tf():
    """Under control flow v2 dynamic_rnn's TensorArrays are TensorLists carried through
    a StatelessWhile: lowered here, the loop carries the lists from one iteration to
    the next."""
    want = EXPECTED["v2_rnn"]
    assert {"StatelessWhile", "TensorListReserve", "TensorListSetItem"} <= set(want["ops"])
    gd = GraphDef.FromString((HERE / "v2_rnn.pb").read_bytes())
    with af.Graph().as_default():
        af.import_graph_def(gd, name="")
        with af.Session() as sess:
            sess.run("init")
            seq = np.array(FEEDS["seq"], np.float32)
            out, h = sess.run(["rnn_out:0", "rnn_h:0"], {"seq:0": seq})
    np.testing.assert_allclose(out, want["rnn_out"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, want["rnn_h"], rtol=1e-5, atol=1e-6)
