"""Runtime and file behaviours checked against TF 1 (recorded from TF 2.21's tf.compat.v1):
the form of Const value protos, ref/resource ScatterNd* on a GPU, shuffle_batch's
capacity check, and what a resource variable's assign returns."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos import GraphDef

# -- Const value protos -----------------------------------------------------------------

# (builder, the value TensorProto's serialized bytes), recorded from TF 2.21: the values
# given in the dtype's typed field (fewer than the shape holds: the last one repeats),
# except a full array of a numeric dtype (two or more elements) as tensor_content.
CONST_PROTOS = [
    ("constant(0.0, shape=[5])", lambda: tf.constant(0.0, shape=[5]),
     "08011204120208052a0400000000"),
    ("constant(1, shape=[2, 3])", lambda: tf.constant(1, shape=[2, 3]),
     "0803120812020802120208033a0101"),
    ("constant(np.zeros(6))", lambda: tf.constant(np.zeros(6, np.float32)),
     "08011204120208062218000000000000000000000000000000000000000000000000"),
    ("constant([1, 2], shape=[5])", lambda: tf.constant([1, 2], shape=[5]),
     "08031204120208053a020102"),
    ("constant([0, 0, 0], shape=[6])", lambda: tf.constant([0, 0, 0], shape=[6]),
     "08031204120208063a03000000"),
    ("constant([1., 2.], shape=[2, 2])", lambda: tf.constant([1.0, 2.0], shape=[2, 2]),
     "0801120812020802120208022a080000803f00000040"),
    ("constant(array([[1., 2.]]), shape=[2, 2])",
     lambda: tf.constant(np.array([[1.0, 2.0]]), shape=[2, 2]),
     "0802120812020802120208023210000000000000f03f0000000000000040"),
    ("constant(['x', 'x', 'x'])", lambda: tf.constant(["x", "x", "x"]),
     "0807120412020803420178420178420178"),
    ("constant('x', shape=[3])", lambda: tf.constant("x", shape=[3]),
     "0807120412020803420178"),
    ("constant(['a', 'b'], shape=[3])", lambda: tf.constant(["a", "b"], shape=[3]),
     "0807120412020803420161420162"),
    ("constant([True, True])", lambda: tf.constant([True, True]),
     "080a1204120208025a020101"),
    ("constant(True, shape=[3])", lambda: tf.constant(True, shape=[3]),
     "080a1204120208035a0101"),
    ("constant(full(3, 1+2j, complex64))", lambda: tf.constant(np.full(3, 1 + 2j, np.complex64)),
     "08081204120208034a180000803f000000400000803f000000400000803f00000040"),
    ("constant(1+2j, shape=[3])", lambda: tf.constant(1 + 2j, shape=[3]),
     "08121204120208036210000000000000f03f0000000000000040"),
    ("constant(full(4, 2.5, float16))", lambda: tf.constant(np.full(4, 2.5, np.float16)),
     "081312041202080422080041004100410041"),
    ("constant(float16(1.5), shape=[3])", lambda: tf.constant(np.float16(1.5), shape=[3]),
     "08131204120208036a02807c"),
    ("constant(1., bfloat16, shape=[2])", lambda: tf.constant(1.0, tf.bfloat16, shape=[2]),
     "080e1204120208026a02807f"),
    ("constant(3, int64, shape=[2])", lambda: tf.constant(3, tf.int64, shape=[2]),
     "0809120412020802520103"),
    ("constant(7, uint32, shape=[2])", lambda: tf.constant(7, tf.uint32, shape=[2]),
     "081612041202080282010107"),
    ("constant(7, uint8, shape=[2])", lambda: tf.constant(7, tf.uint8, shape=[2]),
     "08041204120208023a0107"),
    ("constant([], shape=[3])", lambda: tf.constant([], shape=[3]), "0801120412020803"),
    ("constant(1., shape=[0])", lambda: tf.constant(1.0, shape=[0]), "080112021200"),
    ("constant(broadcast_to(1., (3,)))",
     lambda: tf.constant(np.broadcast_to(np.float32(1.0), (3,))),
     "0801120412020803220c0000803f0000803f0000803f"),
    ("zeros([10])", lambda: tf.zeros([10]), "080112041202080a2a0400000000"),
    ("ones([3, 3], int32)", lambda: tf.ones([3, 3], tf.int32), "0803120812020803120208033a0101"),
    ("zeros([2], string)", lambda: tf.zeros([2], tf.string), "08071204120208024200"),
    ("zeros_like(constant([1., 2.]))", lambda: tf.zeros_like(tf.constant([1.0, 2.0])),
     "08011204120208022a0400000000"),
    ("constant([5], shape=[])", lambda: tf.constant([5], shape=[]), "080312003a0105"),
]  # fmt: skip


@pytest.mark.parametrize("build, expected", [c[1:] for c in CONST_PROTOS],
                         ids=[c[0] for c in CONST_PROTOS])  # fmt: skip
def test_const_value_proto_is_tfs(graph, build, expected):
    t = build()
    assert t.op.get_attr("value").SerializeToString().hex() == expected
    (node,) = [n for n in graph.as_graph_def().node if n.name == t.op.name]
    assert node.attr["value"].tensor.SerializeToString().hex() == expected


def test_large_splat_constant_stays_small(graph, sess):
    t = tf.constant(0.0, shape=[1000000])
    assert graph.as_graph_def().ByteSize() < 200
    out = sess.run(t)
    assert out.shape == (1000000,) and out.flags.writeable and not out.any()


def test_large_zeros_is_a_fill_named_as_tf(graph):
    tf.zeros([2000], name="p")
    # Recorded from TF 2.21: the shape Const is "shape_as_tensor", the value one "Const".
    assert [(op.name, op.type) for op in graph.get_operations()] == [
        ("p/shape_as_tensor", "Const"),
        ("p/Const", "Const"),
        ("p", "Fill"),
    ]


def test_compact_protos_read_whole_and_write_back_the_same(graph, sess):
    # Const nodes as TF 2.21 writes them (NodeDefs serialized deterministically, recorded).
    nodes = {
        "a": "0a01611205436f6e73742a0b0a056474797065120230012a190a0576616c75651210420e"
        "08011204120208052a0400000000",
        "f": "0a01661205436f6e73742a0b0a056474797065120230032a170a0576616c7565120e420c"
        "08031204120208053a020102",
        "g": "0a01671205436f6e73742a0b0a056474797065120230072a190a0576616c75651210420e"
        "0807120412020803420161420162",
        "e": "0a01651205436f6e73742a0b0a056474797065120230012a130a0576616c7565120a4208"
        "0801120412020803",
        "c": "0a01631205436f6e73742a0b0a056474797065120230122a250a0576616c7565121c421a"
        "08121204120208026210000000000000f03f0000000000000040",
        "h": "0a01681205436f6e73742a0b0a056474797065120230132a170a0576616c7565120e420c"
        "08131204120208036a02807c",
    }
    gd = GraphDef()
    for hex_ in nodes.values():
        gd.node.add().ParseFromString(bytes.fromhex(hex_))
    tf.import_graph_def(gd, name="")
    out = {
        n.name: n.SerializeToString(deterministic=True).hex() for n in graph.as_graph_def().node
    }
    assert out == nodes
    got = sess.run({name: name + ":0" for name in nodes})
    np.testing.assert_array_equal(got["a"], np.zeros(5, np.float32))
    np.testing.assert_array_equal(got["f"], np.array([1, 2, 2, 2, 2], np.int32))
    assert got["g"].tolist() == [b"a", b"b", b"b"]
    np.testing.assert_array_equal(got["e"], np.zeros(3, np.float32))
    np.testing.assert_array_equal(got["c"], np.full(2, 1 + 2j))
    assert got["h"].dtype == np.float16 and got["h"].tolist() == [1.5, 1.5, 1.5]
    assert all(v.flags.writeable for v in got.values())
    proto = graph.get_operation_by_name("f").get_attr("value")
    np.testing.assert_array_equal(tf.make_ndarray(proto), [1, 2, 2, 2, 2])


def test_make_tensor_proto_writes_the_values_given():
    # Recorded from TF 2.21 (tf.make_tensor_proto(...).SerializeToString()).
    cases = [
        (tf.make_tensor_proto([1, 2], shape=[4]), "08031204120208043a020102"),
        (tf.make_tensor_proto(0.0, shape=[4]), "08011204120208042a0400000000"),
        (tf.make_tensor_proto([True, False, True]), "080a1204120208035a03010001"),
        (tf.make_tensor_proto(np.broadcast_to(np.float32(2), (3,))),
         "0801120412020803220c000000400000004000000040"),
    ]  # fmt: skip
    assert [p.SerializeToString().hex() for p, _ in cases] == [h for _, h in cases]


# -- ref ScatterNd* on a GPU (the strict CuPy stand-in) -----------------------------------


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_ref_scatter_nd_runs_on_the_gpu(fake_gpu):
    with tf.Graph().as_default():
        with tf.device("/gpu:0"):
            v = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
            w = tf.Variable([1, 2, 3, 4], dtype=tf.int64)
        steps = [
            v.scatter_nd_update([[1]], [[9.0, 9.0]]),
            v.scatter_nd_add([[0, 1], [2, 0]], [10.0, 20.0]),
            v.scatter_nd_sub([[0]], [[1.0, 1.0]]),
            tf.scatter_nd_update(w, [[1], [3]], [7, 8]),
            tf.scatter_nd_add(w, [[0], [0]], [5, 6]),
            tf.scatter_nd_sub(w, [[2]], [1]),
        ]
        bad = tf.scatter_nd_update(w, [[7]], [1])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = [sess.run(s).tolist() for s in steps]
            with pytest.raises(tf.errors.InvalidArgumentError) as info:
                sess.run(bad)
            after = sess.run(w).tolist()
            placed = {op.name: d.device_type for op, d in sess._master.placer.assignment.items()}
    # Recorded from TF 2.21 (the same program on its CPU).
    assert got == [
        [[1.0, 2.0], [9.0, 9.0], [5.0, 6.0]],
        [[1.0, 12.0], [9.0, 9.0], [25.0, 6.0]],
        [[0.0, 11.0], [9.0, 9.0], [25.0, 6.0]],
        [1, 7, 3, 8],
        [12, 7, 3, 8],
        [12, 7, 2, 8],
    ]
    assert "indices[0] = [7] does not index into shape [4]" in info.value.message
    assert after == [12, 7, 2, 8]  # a bad index leaves the variable as it was
    assert {placed[s.op.name] for s in steps} == {"GPU"}


@pytest.mark.parametrize("op_type", ["ResourceScatterNdUpdate", "ResourceScatterNdAdd",
                                     "ResourceScatterNdSub", "ScatterNdUpdate"])  # fmt: skip
def test_scatter_nd_updates_have_gpu_kernels(op_type):
    from asyncflow.registry import get_op_def

    kernel = get_op_def(op_type).kernel_for("GPU")
    assert kernel is not None and "indices" in kernel.host_memory


# -- shuffle_batch's capacity check (TF 2.21's tf.compat.v1.train, recorded) ---------------


@pytest.mark.parametrize("maybe", [False, True])
@pytest.mark.parametrize("capacity, min_after_dequeue", [(10, 10), (10, 20)])
def test_shuffle_batch_refuses_capacity_not_above_min_after_dequeue(
    maybe, capacity, min_after_dequeue
):
    kw = {"keep_input": True} if maybe else {}
    build = tf.train.maybe_shuffle_batch if maybe else tf.train.shuffle_batch
    with tf.Graph().as_default():
        with pytest.raises(ValueError) as info:
            build([tf.constant([1.0, 2.0])], 2, capacity, min_after_dequeue, **kw)
    assert str(info.value) == (
        f"capacity {capacity} must be bigger than min_after_dequeue {min_after_dequeue}."
    )


@pytest.mark.parametrize("maybe", [False, True])
def test_shuffle_batch_join_builds_and_its_queue_fails_when_run(maybe):
    kw = {"keep_input": True} if maybe else {}
    build = tf.train.maybe_shuffle_batch_join if maybe else tf.train.shuffle_batch_join
    with tf.Graph().as_default():
        batch = build([[tf.constant([1.0, 2.0])]], 2, 3, 5, **kw)
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError) as info:
                sess.run(batch)
    assert info.value.op.name == "shuffle_batch_join/random_shuffle_queue"
    assert info.value.message.startswith("min_after_dequeue 5 must be < capacity 3")


def test_shuffle_batch_join_with_capacity_equal_divides_by_zero_as_tf():
    # TF's fill summary takes 1. / (capacity - min_after_dequeue) while building.
    with tf.Graph().as_default():
        with pytest.raises(ZeroDivisionError):
            tf.train.shuffle_batch_join([[tf.constant([1.0])]], 2, 4, 4)


def test_shuffle_batch_ops_are_named_as_tf():
    with tf.Graph().as_default() as g:
        batch = tf.train.shuffle_batch_join([[tf.constant([1.0])]], 2, 5, 1)
        ops_ = [(op.name, op.type) for op in g.get_operations()]
    assert batch.name == "shuffle_batch_join:0"
    s = "shuffle_batch_join/"
    assert ops_ == [
        ("Const", "Const"),
        (s + "Const", "Const"),
        (s + "random_shuffle_queue", "RandomShuffleQueueV2"),
        (s + "random_shuffle_queue_enqueue", "QueueEnqueueV2"),
        (s + "random_shuffle_queue_Close", "QueueCloseV2"),
        (s + "random_shuffle_queue_Close_1", "QueueCloseV2"),
        (s + "random_shuffle_queue_Size", "QueueSizeV2"),
        (s + "sub/y", "Const"),
        (s + "sub", "Sub"),
        (s + "Maximum/x", "Const"),
        (s + "Maximum", "Maximum"),
        (s + "Cast", "Cast"),
        (s + "mul/y", "Const"),
        (s + "mul", "Mul"),
        (s + "fraction_over_1_of_4_full/tags", "Const"),
        (s + "fraction_over_1_of_4_full", "ScalarSummary"),
        (s + "n", "Const"),
        ("shuffle_batch_join", "QueueDequeueManyV2"),
    ]
    with tf.Graph().as_default():
        tf.train.shuffle_batch([tf.constant([1.0])], 2, 5, 1, num_threads=3)
        (runner,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
        # One enqueue op, run by three threads.
        assert [op.name for op in runner.enqueue_ops] == [
            "shuffle_batch/random_shuffle_queue_enqueue"
        ] * 3


# -- what a resource variable's assign returns (TF 2.21's _UnreadVariable, recorded) -------


def test_resource_assign_returns_the_variable_after_the_update(graph, sess):
    v = tf.Variable([1.0, 2.0], use_resource=True, name="v")
    first = len(graph.get_operations())
    a = v.assign([3.0, 4.0])
    b = v.assign_add([1.0, 1.0], name="aa")
    c = tf.assign(v, [7.0, 8.0])
    d = tf.assign_add(v, [1.0, 1.0])
    with tf.control_dependencies([a]):
        e = tf.identity(v, name="e")
    f = a * 2
    grouped = tf.group(a, b)
    with tf.name_scope("sc"):
        h = v.assign_sub([1.0, 1.0])
    no_read = v.assign([5.0, 6.0], read_value=False)
    assert [
        (a.name, a.op.name, a.op.type, a.dtype, a.shape.as_list(), type(a).__name__),
        (b.name, b.op.type),
        (c.name, c.op.type),
        (d.name, d.op.type),
        (h.name, h.op.type),
        (no_read.name, no_read.type),
    ] == [
        ("AssignVariableOp", "AssignVariableOp", "AssignVariableOp", tf.float32, [2],
         "_UnreadVariable"),
        ("aa", "AssignAddVariableOp"),
        ("AssignVariableOp_1", "AssignVariableOp"),
        ("AssignAddVariableOp", "AssignAddVariableOp"),
        ("sc/AssignSubVariableOp", "AssignSubVariableOp"),
        ("AssignVariableOp_2", "AssignVariableOp"),
    ]  # fmt: skip
    assert not isinstance(a, tf.Tensor)
    assert repr(a) == "<tf.Variable 'AssignVariableOp' shape=(2,) dtype=float32>"
    made = [
        (op.name, op.type, [t.name for t in op.inputs], [x.name for x in op.control_inputs])
        for op in graph.get_operations()[first:]
    ]
    assert made == [
        ("Const", "Const", [], []),
        ("AssignVariableOp", "AssignVariableOp", ["v:0", "Const:0"], []),
        ("ReadVariableOp", "ReadVariableOp", ["v:0"], ["AssignVariableOp"]),
        ("Const_1", "Const", [], []),
        ("aa", "AssignAddVariableOp", ["v:0", "Const_1:0"], []),
        ("ReadVariableOp_1", "ReadVariableOp", ["v:0"], ["aa"]),
        ("Const_2", "Const", [], []),
        ("AssignVariableOp_1", "AssignVariableOp", ["v:0", "Const_2:0"], []),
        ("ReadVariableOp_2", "ReadVariableOp", ["v:0"], ["AssignVariableOp_1"]),
        ("Const_3", "Const", [], []),
        ("AssignAddVariableOp", "AssignAddVariableOp", ["v:0", "Const_3:0"], []),
        ("ReadVariableOp_3", "ReadVariableOp", ["v:0"], ["AssignAddVariableOp"]),
        ("e/ReadVariableOp", "ReadVariableOp", ["v:0"], ["AssignVariableOp"]),
        ("e", "Identity", ["e/ReadVariableOp:0"], []),
        ("ReadVariableOp_4", "ReadVariableOp", ["v:0"], ["AssignVariableOp"]),
        ("mul/y", "Const", [], []),
        ("mul", "Mul", ["ReadVariableOp_4:0", "mul/y:0"], []),
        ("group_deps", "NoOp", [], ["AssignVariableOp", "aa"]),
        ("sc/Const", "Const", [], []),
        ("sc/AssignSubVariableOp", "AssignSubVariableOp", ["v:0", "sc/Const:0"], []),
        ("sc/ReadVariableOp", "ReadVariableOp", ["v:0"], ["sc/AssignSubVariableOp"]),
        ("Const_4", "Const", [], []),
        ("AssignVariableOp_2", "AssignVariableOp", ["v:0", "Const_4:0"], []),
    ]
    sess.run(v.initializer)
    got = [sess.run(x).tolist() for x in (a, b, c, d, e, f)]
    assert got == [[3.0, 4.0], [4.0, 5.0], [7.0, 8.0], [8.0, 9.0], [3.0, 4.0], [6.0, 8.0]]
    assert sess.run(grouped) is None and sess.run(no_read) is None
    assert a.eval(session=sess).tolist() == [3.0, 4.0]
    read = a.read_value()
    assert read.op.type == "ReadVariableOp" and read.op.control_inputs == [a.op]


def test_resource_scatters_build_tfs_resource_ops(graph, sess):
    v = tf.Variable([1.0, 2.0, 3.0], use_resource=True, name="v")
    first = len(graph.get_operations())
    i = v.scatter_update(tf.IndexedSlices(tf.constant([5.0]), tf.constant([0])))
    j = v.scatter_nd_add([[1]], [10.0])
    k = tf.scatter_add(v, [2], [1.0])
    made = [(op.name, op.type) for op in graph.get_operations()[first:]]
    # Recorded from TF 2.21.
    assert made == [
        ("Const", "Const"),
        ("Const_1", "Const"),
        ("ResourceScatterUpdate", "ResourceScatterUpdate"),
        ("ReadVariableOp", "ReadVariableOp"),
        ("Const_2", "Const"),
        ("ResourceScatterNdAdd/indices", "Const"),
        ("ResourceScatterNdAdd", "ResourceScatterNdAdd"),
        ("ReadVariableOp_1", "ReadVariableOp"),
        ("Const_3", "Const"),
        ("ResourceScatterAdd/indices", "Const"),
        ("ResourceScatterAdd", "ResourceScatterAdd"),
        ("ReadVariableOp_2", "ReadVariableOp"),
    ]
    assert (type(k).__name__, k.name) == ("_UnreadVariable", "ResourceScatterAdd")
    sess.run(v.initializer)
    assert [sess.run(x).tolist() for x in (i, j, k)] == [
        [5.0, 2.0, 3.0],
        [5.0, 12.0, 3.0],
        [5.0, 12.0, 4.0],
    ]


def _class(op):
    return [c.decode() for c in op.get_attr("_class")] if "_class" in op.node_def.attr else []


def test_resource_variable_ops_and_colocation_as_tf(graph):
    w = tf.Variable(lambda: tf.zeros([2]) + 1.0, use_resource=True, name="w")
    w * 2  # noqa: B018 - a read, for its ops
    got = [(op.name, op.type, _class(op)) for op in graph.get_operations()]
    # Recorded from TF 2.21 (minus the ops only asyncflow keeps: w/Ref, a ref view).
    assert [g for g in got if g[0] != "w/Ref"] == [
        ("w/Initializer/zeros", "Const", ["loc:@w"]),
        ("w/Initializer/add/y", "Const", ["loc:@w"]),
        ("w/Initializer/add", "AddV2", ["loc:@w"]),
        ("w", "VarHandleOp", ["loc:@w"]),
        ("w/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp", []),
        ("w/Assign", "AssignVariableOp", []),
        ("w/Read/ReadVariableOp", "ReadVariableOp", []),
        ("ReadVariableOp", "ReadVariableOp", []),
        ("mul/y", "Const", []),
        ("mul", "Mul", []),
    ]


def test_resource_assign_of_another_shape_fails_when_run(graph, sess):
    w = tf.Variable([1.0, 2.0], use_resource=True, name="w")
    p = tf.placeholder(tf.float32, None)
    assigned = w.assign(p)
    assert assigned.op.get_attr("validate_shape") is True  # (TF 2.21: a known shape)
    sess.run(w.initializer)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(assigned, {p: [1.0, 2.0, 3.0]})
    assert info.value.message.startswith(
        "Trying to assign to variable with tensor with wrong shape. Expected [2] got [3]"
    )
    assert sess.run(w).tolist() == [1.0, 2.0]


def test_tensor_summary_writes_raw_content_as_tfs_kernel(graph, sess):
    summaries = [
        tf.summary.tensor_summary("a", tf.constant(1.5)),
        tf.summary.tensor_summary("b", tf.zeros([3])),
        tf.summary.tensor_summary("c", tf.constant([True, False])),
        tf.summary.tensor_summary("e", tf.fill([2], 3.0)),
    ]
    # Recorded from TF 2.21: its kernel writes every value as tensor_content (a splat
    # Const's and a scalar's too), whatever form the Const's own proto has.
    assert [s.hex() for s in sess.run(summaries)] == [
        "0a110a0161420a0801120022040000c03f4a00",
        "0a1d0a016242160801120412020803220c0000000000000000000000004a00",
        "0a130a0163420c080a120412020802220201004a00",
        "0a190a016542120801120412020802220800004040000040404a00",
    ]
