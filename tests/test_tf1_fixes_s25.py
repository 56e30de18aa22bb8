"""TF1 semantics fixes of session 25: each case's expected graph, values or errors were
recorded from TensorFlow 2.21 (`tf.compat.v1`, graph mode) unless the comment says
TF 2.15.1."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors


def _ops(g):
    return [
        (op.name, op.type, [t.name for t in op.inputs], [c.name for c in op.control_inputs])
        for op in g.get_operations()
    ]


# -- 1. tf.Assert's AssertGuard ----------------------------------------------------------

# TF 2.21: Assert(c, ["msg", x]) with x float32 builds this cond (op order aside: TF adds
# a branch op before the Switches of its inputs).
_GUARDED = [
    ("x", "Placeholder", [], []),
    ("c", "Placeholder", [], []),
    ("Assert/Const", "Const", [], []),
    ("Assert/AssertGuard/Switch", "Switch", ["c:0", "c:0"], []),
    ("Assert/AssertGuard/switch_t", "Identity", ["Assert/AssertGuard/Switch:1"], []),
    ("Assert/AssertGuard/switch_f", "Identity", ["Assert/AssertGuard/Switch:0"], []),
    ("Assert/AssertGuard/pred_id", "Identity", ["c:0"], []),
    ("Assert/AssertGuard/NoOp", "NoOp", [], ["Assert/AssertGuard/switch_t"]),
    (
        "Assert/AssertGuard/control_dependency",
        "Identity",
        ["Assert/AssertGuard/switch_t:0"],
        ["Assert/AssertGuard/NoOp"],
    ),
    ("Assert/AssertGuard/Assert/data_0", "Const", [], ["Assert/AssertGuard/switch_f"]),
    (
        "Assert/AssertGuard/Assert",
        "Assert",
        [
            "Assert/AssertGuard/Assert/Switch:0",
            "Assert/AssertGuard/Assert/data_0:0",
            "Assert/AssertGuard/Assert/Switch_1:0",
        ],
        [],
    ),
    ("Assert/AssertGuard/Assert/Switch", "Switch", ["c:0", "Assert/AssertGuard/pred_id:0"], []),
    ("Assert/AssertGuard/Assert/Switch_1", "Switch", ["x:0", "Assert/AssertGuard/pred_id:0"], []),
    (
        "Assert/AssertGuard/control_dependency_1",
        "Identity",
        ["Assert/AssertGuard/switch_f:0"],
        ["Assert/AssertGuard/Assert"],
    ),
    (
        "Assert/AssertGuard/Merge",
        "Merge",
        ["Assert/AssertGuard/control_dependency_1:0", "Assert/AssertGuard/control_dependency:0"],
        [],
    ),
]


def test_assert_with_float_data_is_guarded_by_a_cond():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        c = tf.placeholder(tf.bool, [], name="c")
        a = tf.Assert(c, ["msg", x])
    assert isinstance(a, tf.Operation)
    assert (a.name, a.type) == ("Assert/AssertGuard/Merge", "Merge")
    assert [(t.dtype, t.shape.as_list()) for t in a.outputs] == [
        (tf.bool, []),
        (tf.int32, []),
    ]
    assert sorted(_ops(g)) == sorted(_GUARDED)


def test_assert_with_int32_and_string_data_stays_bare():
    g = tf.Graph()
    with g.as_default():
        c = tf.placeholder(tf.bool, [], name="c")
        b = tf.Assert(c, ["msg", tf.constant(3)], name="intonly")
        p = tf.Assert(True, ["m", 3], name="pyint")
    assert (b.name, b.type) == ("intonly/Assert", "Assert")
    assert (p.name, p.type) == ("pyint/Assert", "Assert")
    assert _ops(g)[-6:] == [
        ("pyint/Const", "Const", [], []),
        ("pyint/Const_1", "Const", [], []),
        ("pyint/Assert/condition", "Const", [], []),
        ("pyint/Assert/data_0", "Const", [], []),
        ("pyint/Assert/data_1", "Const", [], []),
        (
            "pyint/Assert",
            "Assert",
            ["pyint/Assert/condition:0", "pyint/Assert/data_0:0", "pyint/Assert/data_1:0"],
            [],
        ),
    ]


def test_assert_python_condition_and_float_constant():
    g = tf.Graph()
    with g.as_default():
        b = tf.Assert(False, [1.5], name="pyfloat")
    assert b.name == "pyfloat/AssertGuard/Merge"
    assert sorted(_ops(g)) == sorted(
        [
            ("pyfloat/Const", "Const", [], []),
            ("pyfloat/Condition", "Const", [], []),
            ("pyfloat/AssertGuard/Switch", "Switch", ["pyfloat/Condition:0"] * 2, []),
            ("pyfloat/AssertGuard/switch_t", "Identity", ["pyfloat/AssertGuard/Switch:1"], []),
            ("pyfloat/AssertGuard/switch_f", "Identity", ["pyfloat/AssertGuard/Switch:0"], []),
            ("pyfloat/AssertGuard/pred_id", "Identity", ["pyfloat/Condition:0"], []),
            ("pyfloat/AssertGuard/NoOp", "NoOp", [], ["pyfloat/AssertGuard/switch_t"]),
            (
                "pyfloat/AssertGuard/control_dependency",
                "Identity",
                ["pyfloat/AssertGuard/switch_t:0"],
                ["pyfloat/AssertGuard/NoOp"],
            ),
            (
                "pyfloat/AssertGuard/Assert/Switch",
                "Switch",
                ["pyfloat/Condition:0", "pyfloat/AssertGuard/pred_id:0"],
                [],
            ),
            ("pyfloat/AssertGuard/Assert/data_0", "Const", [], ["pyfloat/AssertGuard/switch_f"]),
            (
                "pyfloat/AssertGuard/Assert",
                "Assert",
                ["pyfloat/AssertGuard/Assert/Switch:0", "pyfloat/AssertGuard/Assert/data_0:0"],
                [],
            ),
            (
                "pyfloat/AssertGuard/control_dependency_1",
                "Identity",
                ["pyfloat/AssertGuard/switch_f:0"],
                ["pyfloat/AssertGuard/Assert"],
            ),
            (
                "pyfloat/AssertGuard/Merge",
                "Merge",
                [
                    "pyfloat/AssertGuard/control_dependency_1:0",
                    "pyfloat/AssertGuard/control_dependency:0",
                ],
                [],
            ),
        ]
    )


def test_guarded_assert_runs_and_fails_as_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        c = tf.placeholder(tf.bool, [], name="c")
        a = tf.Assert(c, ["msg", x])
        d = tf.Assert(c, [x, x * 2], summarize=1, name="named")
        with tf.control_dependencies([a]):
            z = tf.identity(x)
        with tf.Session() as s:
            assert s.run(a, {x: [1, 2], c: True}) is None
            assert s.run(z, {x: [1, 2], c: True}).tolist() == [1.0, 2.0]
            with pytest.raises(errors.InvalidArgumentError) as e:
                s.run(z, {x: [1, 2], c: False})
            assert "assertion failed: [msg] [1 2]" in e.value.message
            assert e.value.op.name == "Assert/AssertGuard/Assert"
            with pytest.raises(errors.InvalidArgumentError) as e:
                s.run(d, {x: [1, 2], c: False})
            assert "assertion failed: [1...] [2...]" in e.value.message
            assert e.value.op.name == "named/AssertGuard/Assert"


def test_guarded_assert_inside_while_loop_and_assert_equal():
    g = tf.Graph()
    with g.as_default():

        def body(i):
            a = tf.Assert(tf.less(i, 3), [tf.cast(i, tf.float32)], name="inloop")
            with tf.control_dependencies([a]):
                return i + 1

        r = tf.while_loop(lambda i: i < 5, body, [tf.constant(0)])
        x = tf.placeholder(tf.float32, [], name="x")
        e = tf.assert_equal(x, 1.0, name="ae")
        names = {op.name for op in g.get_operations()}
        assert "while/inloop/AssertGuard/Assert" in names
        assert e.type == "Merge" and e.name.endswith("/Assert/AssertGuard/Merge")
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError) as err:
                s.run(r)
            assert "assertion failed: [3]" in err.value.message
            assert s.run(e, {x: 1.0}) is None
            with pytest.raises(errors.InvalidArgumentError) as err:
                s.run(e, {x: 2.0})
            assert "[Condition x == y did not hold element-wise:] [x (x:0) = ] [2]" in (
                err.value.message
            )


def test_case_exclusive_assert_is_guarded():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.int32, [], name="p")
        r = tf.case(
            [
                (tf.equal(p, 1), lambda: tf.constant(1.0)),
                (tf.equal(p, 2), lambda: tf.constant(2.0)),
            ],
            default=lambda: tf.constant(0.0),
            exclusive=True,
        )
        names = {op.name: op.type for op in g.get_operations()}
        assert names["case/num_true_conds"] == "Sum"
        assert names["case/Assert/AssertGuard/Assert"] == "Assert"
        with tf.Session() as s:
            assert s.run(r, {p: 1}) == 1.0
            assert s.run(r, {p: 3}) == 0.0


# -- 2. enqueue of a list, tuple or dict ---------------------------------------------------


def test_enqueue_pairs_values_with_components_as_zip():
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(10, tf.float32, name="q")
        built = [
            q.enqueue([1.0]),
            q.enqueue((2.0,)),
            q.enqueue(3.0),
            q.enqueue([4.0, 5.0]),  # TF keeps the first value only
            q.enqueue_many([[6.0, 7.0]]),
            q.enqueue_many(([8.0],)),
        ]
        assert [op.name for op in built] == [
            "q_enqueue",
            "q_enqueue_1",
            "q_enqueue_2",
            "q_enqueue_3",
            "q_EnqueueMany",
            "q_EnqueueMany_1",
        ]
        assert [t.name for t in built[3].inputs] == ["q:0", "q_enqueue_3/component_0:0"]
        with pytest.raises(ValueError, match=r"Shape \(\) must have rank at least 1"):
            q.enqueue_many([9.0, 10.0])
        with pytest.raises(ValueError, match="Queue must have names to enqueue a dictionary"):
            q.enqueue({"a": 1.0})
        qs = tf.FIFOQueue(10, tf.float32, shapes=[[2]], name="qs")
        with pytest.raises(ValueError, match=r"Shapes \(\) and \(2,\) are incompatible"):
            qs.enqueue([1.0, 2.0])
        with pytest.raises(ValueError, match=r"Shapes \(\) and \(2,\) are incompatible"):
            qs.enqueue_many([[1.0, 2.0], [3.0, 4.0]])
        qs_op = qs.enqueue([[1.0, 2.0]])
        pr = tf.PriorityQueue(10, [tf.float32], shapes=[[]], name="pr")
        pr_op = pr.enqueue((3, 1.0, 7.0))
        assert [t.name for t in pr_op.inputs] == [
            "pr:0",
            "pr_enqueue/component_0:0",
            "pr_enqueue/component_1:0",
        ]
        with tf.Session() as s:
            for op in [*built, qs_op, pr_op]:
                s.run(op)
            assert s.run(q.size()) == 7
            one = q.dequeue()
            assert [s.run(one).item() for _ in range(7)] == [1, 2, 3, 4, 6, 7, 8]
            assert s.run(qs.dequeue()).tolist() == [1.0, 2.0]
            assert [x.item() for x in s.run(pr.dequeue())] == [3, 1.0]


def test_enqueue_named_queue_takes_a_dict_only():
    g = tf.Graph()
    with g.as_default():
        qn = tf.FIFOQueue(10, [tf.float32], names=["a"], name="qn")
        one = qn.enqueue({"a": 1.0})
        many = qn.enqueue_many({"a": [2.0, 3.0]})
        with pytest.raises(
            ValueError, match="You must enqueue a dictionary in a Queue with names"
        ):
            qn.enqueue([1.0])
        msg = (
            "Keys in dictionary to enqueue do not match names of Queue.  "
            "Dictionary: ['b'],Queue: ['a']"
        )
        with pytest.raises(ValueError) as e:
            qn.enqueue({"b": 1.0})
        assert str(e.value) == msg
        out = qn.dequeue()
        with tf.Session() as s:
            s.run(one)
            s.run(many)
            assert s.run(out) == {"a": 1.0}


def test_enqueue_of_too_few_components_fails_when_run():
    g = tf.Graph()
    with g.as_default():
        q2 = tf.FIFOQueue(10, [tf.float32, tf.int32], name="q2")
        short = q2.enqueue([1.0])
        short_many = q2.enqueue_many([[1.0, 2.0]])
        assert [t.name for t in short.inputs] == ["q2:0", "q2_enqueue/component_0:0"]
        extra = q2.enqueue([1.0, 2, 3])
        with tf.Session() as s:
            for op in (short, short_many):
                with pytest.raises(errors.InvalidArgumentError) as e:
                    s.run(op)
                assert (
                    "Signature mismatch, have: resource, float-> expected: resource, float, "
                    "int32->" in e.value.message
                )
            s.run(extra)
            assert [x.item() for x in s.run(q2.dequeue())] == [1.0, 2]


# -- 3. depthwise_conv2d / separable_conv2d: unequal strides, atrous rates ------------------


def _conv_inputs():
    rng = np.random.RandomState(0)
    x = rng.randn(2, 7, 8, 3).astype(np.float32)
    w = rng.randn(3, 3, 3, 2).astype(np.float32)
    pw = rng.randn(1, 1, 6, 4).astype(np.float32)
    return x, w, pw


# (fn, strides, rate, padding) -> (shape, sum rounded to 3 places, first 3 values), from
# TF 2.21; a rate above 1 with strides gives TF's numbers (the strided native op run on
# the space-to-batch'ed input), with a UserWarning.
_CONV_CASES = [
    ("dw", [1, 1, 2, 1], [1, 1], "SAME", (2, 7, 4, 6), -89.322, [2.1884, -2.2738, -2.0042]),
    ("dw", [1, 2, 1, 1], [1, 1], "VALID", (2, 3, 6, 6), 13.341, [-7.1695, -2.048, 3.4608]),
    ("dw", [1, 2, 2, 1], [1, 1], "SAME", (2, 4, 4, 6), -41.939, [2.1884, -2.2738, -2.0042]),
    ("dw", [1, 1, 1, 1], [2, 2], "SAME", (2, 7, 8, 6), -27.52, [1.3838, -1.7423, 0.3525]),
    ("dw", [1, 1, 1, 1], [1, 2], "VALID", (2, 5, 4, 6), 12.063, [-6.296, -0.2682, 2.0275]),
    ("dw", [1, 1, 2, 1], [2, 2], "VALID", (2, 3, 2, 6), -1.273, [-1.8035, -3.292, -2.4293]),
    ("dw", [1, 2, 3, 1], [2, 2], "SAME", (2, 3, 4, 6), 11.311, [1.3838, -1.7423, 0.3525]),
    ("dw", [1, 2, 1, 1], [2, 1], "VALID", (2, 1, 6, 6), 0.481, [-2.8843, 1.7168, -5.2448]),
    ("dw", [1, 2, 2, 1], [2, 1], "SAME", (2, 3, 4, 6), 27.669, [1.1537, -2.9397, 0.7375]),
    ("sep", [1, 2, 1, 1], [1, 1], "SAME", (2, 4, 8, 4), -41.067, [-2.9436, -0.981, 8.2993]),
    ("sep", [1, 2, 3, 1], [1, 1], "VALID", (2, 3, 2, 4), -0.368, [-0.347, 8.9666, -3.2629]),
    ("sep", [1, 1, 1, 1], [1, 2], "SAME", (2, 7, 8, 4), -28.237, [1.5815, 0.6336, 1.1823]),
    ("sep", [1, 1, 2, 1], [2, 2], "SAME", (2, 7, 4, 4), -22.049, [1.4812, 2.247, -2.2294]),
    ("sep", [1, 2, 1, 1], [2, 2], "VALID", (2, 1, 4, 4), 17.749, [1.6817, 2.0276, -2.8697]),
    ("sep", [1, 2, 2, 1], [1, 2], "VALID", (2, 3, 2, 4), -10.641, [-1.4964, 4.083, -0.3881]),
]


@pytest.mark.parametrize("case", _CONV_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def test_depthwise_and_separable_strides_and_rates(case):
    fn, strides, rate, padding, shape, total, head = case
    x, w, pw = _conv_inputs()
    g = tf.Graph()
    with g.as_default(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if fn == "dw":
            y = tf.nn.depthwise_conv2d(x, w, strides, padding, rate=rate)
        else:
            y = tf.nn.separable_conv2d(x, w, pw, strides, padding, rate=rate)
        assert tuple(y.shape.as_list()) == shape
        with tf.Session() as s:
            v = s.run(y)
    assert v.shape == shape
    assert round(float(v.sum()), 3) == pytest.approx(total, abs=2e-3)
    np.testing.assert_allclose(v.ravel()[:3], head, atol=1e-4)
    atrous_strided = max(rate) > 1 and strides != [1, 1, 1, 1]
    msgs = [str(m.message) for m in seen if m.category is UserWarning]
    if fn == "dw" and atrous_strided:
        assert msgs == [
            "When dilation rate is greater than 1, then all values of strides must be 1. "
            f"Received: `dilation rate` {rate} and `strides` {strides}"
        ]
    else:
        assert msgs == []


def test_depthwise_batch_or_depth_stride_fails_when_run():
    x, w, pw = _conv_inputs()
    for strides in ([2, 1, 1, 1], [1, 1, 1, 2]):
        g = tf.Graph()
        with g.as_default():
            y = tf.nn.depthwise_conv2d_native(x, w, strides, "SAME")
            assert y.shape.as_list() == [2, 7, 8, 6]  # TF builds it
            z = tf.nn.separable_conv2d(x, w, pw, strides, "VALID")
            with tf.Session() as s:
                for t in (y, z):
                    with pytest.raises(errors.UnimplementedError) as e:
                        s.run(t)
                    assert e.value.message.startswith(
                        "Current implementation does not yet support strides in the batch "
                        "and depth dimensions."
                    )


def test_atrous_depthwise_graph_as_tf():
    x, w, pw = _conv_inputs()
    g = tf.Graph()
    with g.as_default():
        xi = tf.placeholder(tf.float32, [2, 7, 8, 3], name="x")
        y = tf.nn.depthwise_conv2d(xi, w, [1, 1, 1, 1], "SAME", rate=[2, 2])
        z = tf.nn.separable_conv2d(xi, w, pw, [1, 1, 1, 1], "VALID", rate=[2, 2])
        flat = tf.nn.separable_conv2d(xi, w, pw, [1, 1, 1, 1], "VALID", name="flat")
    assert y.name == "depthwise/BatchToSpaceND:0" and z.name == "separable_conv2d:0"
    assert flat.name == "flat:0" and flat.op.inputs[0].op.name == "flat/depthwise"
    ops_ = [
        (op.name, op.type, [t.shape.as_list() for t in op.outputs]) for op in g.get_operations()
    ]
    assert ops_[1:15] == [
        ("depthwise/filter_in", "Const", [[3, 3, 3, 2]]),
        ("depthwise/Shape", "Const", [[4]]),
        ("depthwise/dilation_rate", "Const", [[2]]),
        ("depthwise/stack", "Const", [[2, 2]]),
        ("depthwise/required_space_to_batch_paddings/input_shape", "Const", [[2]]),
        ("depthwise/required_space_to_batch_paddings/paddings", "Const", [[2, 2]]),
        ("depthwise/required_space_to_batch_paddings/crops", "Const", [[2, 2]]),
        ("depthwise/SpaceToBatchND/block_shape", "Const", [[2]]),
        ("depthwise/SpaceToBatchND/paddings", "Const", [[2, 2]]),
        ("depthwise/SpaceToBatchND", "SpaceToBatchND", [[8, 6, 6, 3]]),
        ("depthwise", "DepthwiseConv2dNative", [[8, 4, 4, 6]]),
        ("depthwise/BatchToSpaceND/block_shape", "Const", [[2]]),
        ("depthwise/BatchToSpaceND/crops", "Const", [[2, 2]]),
        ("depthwise/BatchToSpaceND", "BatchToSpaceND", [[2, 7, 8, 6]]),
    ]
    names = [op[0] for op in ops_]
    assert "separable_conv2d/required_space_to_batch_paddings/base_paddings" in names
    assert ("separable_conv2d/depthwise", "DepthwiseConv2dNative", [[8, 2, 2, 6]]) in ops_


# -- 4. checkpoints with the pre-1a64274 slot names ---------------------------------------


def _partitioned_adam():
    with tf.variable_scope("m", partitioner=tf.fixed_size_partitioner(2)):
        w = tf.get_variable("w", [4, 3], initializer=tf.constant_initializer(0.5))
    loss = tf.reduce_sum(tf.square(tf.matmul(tf.ones([2, 4]), w)))
    return w, tf.train.AdamOptimizer(0.1).minimize(loss)


def _write_old_style_checkpoint(path):
    """Slots of partitioned variables saved whole under their own names, as asyncflow
    wrote them before commit 1a64274 (TF writes slices of "m/w/Adam")."""
    g = tf.Graph()
    with g.as_default():
        w, step = _partitioned_adam()
        old = {"m/w": list(w)}
        for v in tf.global_variables():
            if v.op.name.startswith("m/w/part_") and v.op.name.count("/") == 3:
                old[v.op.name] = v  # m/w/part_0/Adam, m/w/part_1/Adam_1, ...
            elif v.op.name.endswith("_power"):
                old[v.op.name] = v
        saver = tf.train.Saver(old)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(step)
            s.run(tf.assign(g.get_tensor_by_name("m/w/part_1/Adam:0"), [[7.0] * 3] * 2))
            saver.save(s, path)
            return {v.op.name: s.run(v) for v in tf.global_variables()}


def test_saver_restores_slots_saved_under_old_names(tmp_path):
    path = str(tmp_path / "old")
    want = _write_old_style_checkpoint(path)
    held = tf.train.NewCheckpointReader(path).get_variable_to_shape_map()
    assert "m/w/Adam" not in held and held["m/w/part_0/Adam"] == [2, 3]
    for sharded in (False, True):
        g = tf.Graph()
        with g.as_default():
            _partitioned_adam()
            saver = tf.train.Saver(sharded=sharded)
            with tf.Session() as s:
                saver.restore(s, path)
                got = {v.op.name: s.run(v) for v in tf.global_variables()}
        assert sorted(got) == sorted(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        assert got["m/w/part_1/Adam"].tolist() == [[7.0] * 3] * 2


def test_old_slot_names_survive_a_meta_graph_and_tf_names_win(tmp_path):
    old_path, new_path = str(tmp_path / "old"), str(tmp_path / "new")
    _write_old_style_checkpoint(old_path)
    g = tf.Graph()
    with g.as_default():
        _partitioned_adam()
        saver = tf.train.Saver()
        meta = saver.export_meta_graph(str(tmp_path / "m.meta"))
        assert meta is not None
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(tf.assign(g.get_tensor_by_name("m/w/part_1/Adam:0"), [[3.0] * 3] * 2))
            saver.save(s, new_path)
    g = tf.Graph()
    with g.as_default():
        imported = tf.train.import_meta_graph(str(tmp_path / "m.meta"))
        with tf.Session() as s:
            imported.restore(s, old_path)
            assert s.run("m/w/part_1/Adam:0").tolist() == [[7.0] * 3] * 2
            imported.restore(s, new_path)  # TF's names: no fallback involved
            assert s.run("m/w/part_1/Adam:0").tolist() == [[3.0] * 3] * 2


def test_missing_slot_under_both_names_is_not_found(tmp_path):
    path = str(tmp_path / "bare")
    g = tf.Graph()
    with g.as_default():
        w, _ = _partitioned_adam()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            tf.train.Saver({"m/w": list(w)}).save(s, path)
    g = tf.Graph()
    with g.as_default():
        _partitioned_adam()
        with tf.Session() as s, pytest.raises(errors.NotFoundError, match="not found"):
            tf.train.Saver().restore(s, path)


# -- 5. Multinomial with several batch members ----------------------------------------------

# TF 2.21, graph seed 3, sample(2, seed=5), two session runs each.  TF's own order varies
# with thread timing (7 of 50 recorded runs drew some members in another order); these
# are its usual numbers: the members' draws run last-first within each window of
# map_fn's 10 parallel iterations (12 members: 9..0, then 11, 10).
_RNG12 = np.random.RandomState(0).randn(12, 3).round(2).tolist()
_MULTINOMIAL_TF = [
    (
        [[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]],
        [4.0, 6.0],
        [[[2, 2, 0], [4, 2, 0]], [[0, 3, 1], [4, 1, 1]]],
        [[[1, 3, 0], [3, 2, 1]], [[1, 3, 0], [5, 1, 0]]],
    ),
    (
        [[0.0, 1.0, -1.0], [2.0, 0.5, 0.1], [0.3, 0.3, 0.3], [1.0, 2.0, 3.0]],
        [4.0, 6.0, 2.0, 8.0],
        [
            [[1, 3, 0], [3, 2, 1], [0, 0, 2], [2, 2, 4]],
            [[1, 3, 0], [5, 1, 0], [0, 1, 1], [1, 0, 7]],
        ],
        [
            [[2, 2, 0], [5, 1, 0], [1, 1, 0], [2, 1, 5]],
            [[2, 2, 0], [3, 3, 0], [2, 0, 0], [2, 2, 4]],
        ],
    ),
]


_MULTINOMIAL_TF.append(
    (
        _RNG12,
        [float(2 + i % 5) for i in range(12)],
        [
            [[1, 1, 0], [1, 2, 0], [3, 1, 0], [3, 2, 0], [4, 1, 1], [0, 2, 0]]
            + [[2, 1, 0], [2, 2, 0], [4, 0, 1], [1, 2, 3], [1, 1, 0], [0, 2, 1]],
            [[2, 0, 0], [1, 2, 0], [3, 1, 0], [0, 1, 4], [2, 2, 2], [1, 1, 0]]
            + [[2, 1, 0], [0, 4, 0], [5, 0, 0], [1, 3, 2], [0, 2, 0], [0, 2, 1]],
        ],
        [
            [[2, 0, 0], [3, 0, 0], [3, 1, 0], [1, 0, 4], [3, 2, 1], [1, 0, 1]]
            + [[1, 1, 1], [2, 1, 1], [4, 1, 0], [2, 2, 2], [1, 0, 1], [0, 1, 2]],
            [[1, 0, 1], [1, 2, 0], [3, 0, 1], [0, 1, 4], [4, 1, 1], [0, 2, 0]]
            + [[2, 0, 1], [2, 1, 1], [5, 0, 0], [0, 2, 4], [2, 0, 0], [0, 2, 1]],
        ],
    )
)


@pytest.mark.parametrize("case", _MULTINOMIAL_TF, ids=["two", "four", "twelve"])
def test_multinomial_batch_samples_as_tf(case):
    logits, total, first, second = case
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(3)
        s = tf.distributions.Multinomial(total_count=total, logits=logits).sample(2, seed=5)
        assert s.name == "Multinomial/sample/Reshape_3:0"
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(s), first)
            np.testing.assert_array_equal(sess.run(s), second)
