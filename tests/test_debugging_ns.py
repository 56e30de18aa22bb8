"""tf.debugging's own names (assert_shapes, the switches) and tf.sysconfig,
tf.resource_loader, tf.user_ops, as TF 2.21's tf.compat.v1.

assert_shapes' errors and run-time messages were recorded from TF 2.21 (graph mode).
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.ops import check_ops

pytestmark = pytest.mark.timeout(60)
A = tf.debugging.assert_shapes


def _x():
    return tf.zeros([2, 3], name="x")


def _y():
    return tf.zeros([3], name="y")


def _z():
    return tf.zeros([2, 3, 4], name="z")


def _s():
    return tf.zeros([], name="s")


# Specs the static shapes satisfy (TF 2.21 returns its no-op group for each).
PASSES = [
    lambda: [(_x(), ("N", "Q")), (_y(), ("Q",))],
    lambda: {_x(): ("N", "Q"), _y(): ("Q",)},
    lambda: [(_x(), (2, 3))],
    lambda: [(_z(), (Ellipsis, 4))],
    lambda: [(_z(), ("*", "Q", 4))],
    lambda: [(_z(), ("N", "...", "D"))],  # the string "..." is a symbol
    lambda: [(_s(), ())],
    lambda: [(_s(), "")],
    lambda: [(_x(), "NQ")],  # a string spec is its letters
    lambda: [(tf.zeros([1, 3]), (1, "N"))],
    lambda: [([[1, 2]], ("A", "B"))],
    lambda: [(_s(), ("N",)), (_s(), (1,)), (tf.zeros([1]), ())],
    lambda: [(_y(), (Ellipsis, 3))],
    lambda: [(_x(), (None, 3)), (_y(), (None,))],  # None: any size
    lambda: [(tf.zeros([3, 3]), ("N", "N"))],
    lambda: [(_x(), (np.int64(2), 3)), (_x(), ("2", 3))],
    lambda: [(_z(), (Ellipsis, "Q", "D")), (_x(), ("A", "Q")), (_x(), (Ellipsis, "Q"))],
    lambda: [(tf.SparseTensor([[0, 0]], [1.0], [2, 3]), ("N", "Q"))],
    lambda: [],
    lambda: [(np.zeros([2, 3]), ("N", "Q")), (tf.constant([1, 2]), (2,)), ("abc", ())],
    lambda: ((_x(), s) for s in [("N", 3), ["N", 3]]),
]


@pytest.mark.parametrize("shapes", PASSES)
def test_static_shapes_that_fit(shapes):
    with tf.Graph().as_default():
        op = A(shapes())
        assert op.type == "NoOp" and op.name == "group_deps"
        with tf.Session() as s:
            s.run(op)


def _size(source, t, dim, size, got, shape):
    return (
        f"{source}.  Tensor {t}:0 dimension {dim} must have size {size}.  Received size "
        f"{got}, shape {shape}"
    )


ELLIPSIS_FIRST = (
    "specified shape index {}.  Symbol `...` or `*` for a variable number of unspecified "
    "dimensions is only allowed as the first entry"
)
STATIC_ERRORS = [
    (lambda: [(_x(), ("N",))], {}, "Tensor x:0 must have rank in (0, 1).  Received rank 2, "
     "shape (2, 3)"),
    (lambda: [(_x(), ())], {}, "Tensor x:0 must have rank in (0, 1).  Received rank 2, "
     "shape (2, 3)"),
    (lambda: [(_x(), ("N", "Q", "D"))], {"message": "hey"},
     "hey.  Tensor x:0 must have rank 3.  Received rank 2, shape (2, 3)"),
    (lambda: [(_x(), ("N", "Q")), (_y(), ("N",))], {},
     _size("Specified by tensor x:0 dimension 0", "y", 0, 2, 3, "(3,)")),
    (lambda: [(_x(), ("N", "Q")), (_y(), ("N",))], {"message": "zz"},
     "zz.  " + _size("Specified by tensor x:0 dimension 0", "y", 0, 2, 3, "(3,)")),
    (lambda: [(_x(), (2, 4))], {}, _size("Specified explicitly", "x", 1, 4, 3, "(2, 3)")),
    (lambda: [(_x(), (2, 4))], {"message": "hi"},
     "hi.  " + _size("Specified explicitly", "x", 1, 4, 3, "(2, 3)")),
    (lambda: [(_z(), ("...", "D")), (_y(), ("...",))], {},
     "Tensor z:0 must have rank 2.  Received rank 3, shape (2, 3, 4)"),
    (lambda: [(_y(), ("N",)), (_x(), (1, "N"))], {},
     _size("Specified explicitly", "x", 0, 1, 2, "(2, 3)")),
    (lambda: [(_x(), (1.5, "N"))], {}, _size("Specified explicitly", "x", 0, 1, 2, "(2, 3)")),
    (lambda: [(_x(), (True, 3))], {}, _size("Specified explicitly", "x", 0, 1, 2, "(2, 3)")),
    (lambda: [(_x(), (-1, 3))], {}, _size("Specified explicitly", "x", 0, -1, 2, "(2, 3)")),
    (lambda: [(_s(), (3,))], {}, _size("Specified explicitly", "s", 0, 3, 1, "()")),
    (lambda: [(_y(), ())], {}, _size("Specified explicitly", "y", 0, 1, 3, "(3,)")),
    (lambda: [(_s(), ("N",)), (_y(), ("N",))], {},
     _size("Specified by tensor s:0 dimension 0", "y", 0, 1, 3, "(3,)")),
    (lambda: [(_s(), (Ellipsis, 3))], {}, _size("Specified explicitly", "s", -1, 3, 1, "()")),
    (lambda: [(_z(), (Ellipsis,))], {}, _size("Specified explicitly", "z", -1, 1, 4,
                                              "(2, 3, 4)")),
    (lambda: [(_z(), ("*", 3))], {}, _size("Specified explicitly", "z", -1, 3, 4, "(2, 3, 4)")),
    (lambda: [(_z(), (Ellipsis, 3, 4)), (_x(), (Ellipsis, 4))], {},
     _size("Specified explicitly", "x", -1, 4, 3, "(2, 3)")),
    (lambda: [(_y(), (Ellipsis, "A", "B"))], {},
     "Tensor y:0 must have rank at least 2.  Received rank 1, shape (3,)"),
    (lambda: [(_y(), (Ellipsis, "N")), (_x(), ("N", Ellipsis))], {},
     "Tensor x:0 " + ELLIPSIS_FIRST.format(1)),
    (lambda: [(_z(), (Ellipsis, "Q", Ellipsis))], {}, "Tensor z:0 " + ELLIPSIS_FIRST.format(2)),
    (lambda: [(_z(), ("N", "*", 4))], {}, "Tensor z:0 " + ELLIPSIS_FIRST.format(1)),
    (lambda: [(_z(), (2, Ellipsis, 4))], {}, "Tensor z:0 " + ELLIPSIS_FIRST.format(1)),
    # Ranks are checked for every tensor before any size.
    (lambda: [(_x(), ("N", 5)), (_y(), ("A", "B"))], {},
     "Tensor y:0 must have rank 2.  Received rank 1, shape (3,)"),
    (lambda: [(_x(), ("N", "N"))], {},
     _size("Specified by tensor x:0 dimension 0", "x", 1, 2, 3, "(2, 3)")),
    (lambda: (lambda x: [(x, ("N", "Q")), (x, ("N", 4))])(_x()), {},
     _size("Specified explicitly", "x", 1, 4, 3, "(2, 3)")),
    (lambda: [(_x(), 3)], {},
     "Tensor x:0.  Specified shape must be an iterable.  An iterable has the attribute "
     "`__iter__` or `__getitem__`.  Received specified shape: 3"),
    (lambda: [(tf.SparseTensor([[0, 0]], [1.0], [2, 3]), ("N", "Q", "R"))], {},
     "Tensor  must have rank 3.  Received rank 2, shape (2, 3)"),
]  # fmt: skip


STATIC_ERRORS += [
    # (static failures ignore `data`)
    (lambda: [(_x(), (2, 4))], {"data": ["foo"]},
     _size("Specified explicitly", "x", 1, 4, 3, "(2, 3)")),
    (lambda: [(_y(), (Ellipsis, 2, 3))], {"message": "mm"},
     "mm.  Tensor y:0 must have rank at least 2.  Received rank 1, shape (3,)"),
    (lambda: [(_x(),)], {}, "not enough values to unpack (expected 2, got 1)"),
]  # fmt: skip


@pytest.mark.parametrize("shapes,kwargs,message", STATIC_ERRORS)
def test_static_errors_as_tf(shapes, kwargs, message):
    with tf.Graph().as_default(), pytest.raises(ValueError) as e:
        A(shapes(), **kwargs)
    assert str(e.value) == message


def _p(shape, name):
    return tf.placeholder(tf.float32, shape, name=name)


def _size_data(source, t, dim, size, shape, prefix=""):
    return (
        f"assertion failed: [{prefix}] [{source}] [Tensor {t}:0 dimension] [{dim}] "
        f"[must have size] [{size}] [Received shape: ] [{shape}]"
    )


def _rank_data(t, what, shape):
    return f"assertion failed: [] [Tensor {t}:0 must have rank{what}] [Received shape: ] [{shape}]"


# (shapes builder over placeholders p [?, 3], q [?], r (unknown), kwargs, runs): each run
# feeds p/q/r shapes and expects None (passes) or TF 2.21's message.
DYNAMIC = [
    (lambda p, q, r: [(p, ("N", "Q")), (q, ("N",))], {}, [
        ({"p": [2, 3], "q": [2]}, None),
        ({"p": [2, 3], "q": [3]},
         _size_data("Specified by tensor p:0 dimension 0", "q", 0, 2, 3)),
    ]),
    (lambda p, q, r: [(r, ("N", "Q"))], {}, [
        ({"r": [2, 3]}, None),
        ({"r": [2, 3, 1]}, _rank_data("r", "] [2", "2 3 1")),
        ({"r": [2]}, _rank_data("r", "] [2", "2")),
    ]),
    (lambda p, q, r: [(p, (2, 3))], {}, [
        ({"p": [2, 3]}, None),
        ({"p": [4, 3]}, _size_data("Specified explicitly", "p", 0, 2, "4 3")),
    ]),
    (lambda p, q, r: [(r, ("...", 3))], {}, [
        ({"r": [5, 3]}, None),
        ({"r": [5, 4]}, _size_data("Specified explicitly", "r", 1, 3, "5 4")),
        ({"r": []}, _rank_data("r", "] [2", "")),
    ]),
    (lambda p, q, r: [(p, ("N", 3)), (tf.zeros([3], name="y"), ("N",))], {}, [
        ({"p": [3, 3]}, None),
        ({"p": [2, 3]}, _size_data("Specified by tensor p:0 dimension 0", "y", 0, 2, 3)),
    ]),
    (lambda p, q, r: [(r, (Ellipsis, 3))], {}, [
        ({"r": [5, 3]}, None),
        ({"r": [3]}, None),
        ({"r": [2, 2, 3]}, None),
        ({"r": []}, _size_data("Specified explicitly", "r", -1, 3, "")),
        ({"r": [3, 4]}, _size_data("Specified explicitly", "r", -1, 3, "3 4")),
    ]),
    (lambda p, q, r: [(r, (Ellipsis, "N")), (p, ("N", 3))], {}, [
        ({"r": [7, 2], "p": [3, 3]},
         _size_data("Specified by tensor r:0 dimension -1", "p", 0, 2, "3 3")),
    ]),
    (lambda p, q, r: [(r, ())], {}, [
        ({"r": []}, None),
        ({"r": [1]}, None),
        ({"r": [2]}, _size_data("Specified explicitly", "r", 0, 1, 2)),
    ]),
    (lambda p, q, r: [(r, ("N",))], {}, [
        ({"r": []}, None),
        ({"r": [5]}, None),
        ({"r": [2, 2]}, _rank_data("r", " in] [0] [1", "2 2")),
    ]),
    (lambda p, q, r: [(r, ("N", 3))], {"message": "mm"}, [
        ({"r": [2, 4]}, _size_data("Specified explicitly", "r", 1, 3, "2 4", "mm.  ")),
    ]),
    (lambda p, q, r: [(r, ("N", 3))], {"summarize": 1}, [
        ({"r": [2, 4, 5]}, _rank_data("r", "] [2", "2...")),
    ]),
    (lambda p, q, r: [(p, ("N", "Q")), (q, ("N",))],
     {"data": ["extra", "P"], "message": "mm", "summarize": 2}, [
        ({"p": [2, 3], "q": [3]}, "assertion failed: [extra] [P]"),
    ]),
]  # fmt: skip


@pytest.mark.parametrize("shapes,kwargs,runs", DYNAMIC)
def test_run_time_checks_as_tf(shapes, kwargs, runs):
    with tf.Graph().as_default():
        ph = {"p": _p([None, 3], "p"), "q": _p([None], "q"), "r": _p(None, "r")}
        op = A(shapes(ph["p"], ph["q"], ph["r"]), **kwargs)
        with tf.Session() as s:
            for feed, message in runs:
                fd = {ph[k]: np.zeros(v, np.float32) for k, v in feed.items()}
                if message is None:
                    s.run(op, fd)
                    continue
                with pytest.raises(tf.errors.InvalidArgumentError) as e:
                    s.run(op, fd)
                assert message in str(e.value), (feed, str(e.value))


def test_name_scopes_the_checks_not_the_group():
    with tf.Graph().as_default():
        op = A([(_p([None, 3], "p"), ("N", 3))], name="myname")
        assert op.name == "group_deps"
        assert any(o.name.startswith("myname/") for o in tf.get_default_graph().get_operations())


# -- switches, tf.sysconfig, tf.resource_loader, tf.user_ops (TF 2.21) ---------------------


def test_log_device_placement_switch_logs_later_sessions(capfd):
    assert tf.debugging.get_log_device_placement() is False
    try:
        tf.debugging.set_log_device_placement(True)
        assert tf.debugging.get_log_device_placement() is True
        with tf.Graph().as_default():
            x = tf.add(tf.constant(1.0, name="cx"), 2.0, name="add")
            with tf.Session() as s:
                assert s.run(x) == 3.0
    finally:
        tf.debugging.set_log_device_placement(False)
    err = capfd.readouterr().err
    # TF 2.21 prints these three lines (in its own order) for a graph-mode session.
    for line in ("add: (AddV2): ", "cx: (Const): ", "add/y: (Const): "):
        assert line + "/job:localhost/replica:0/task:0/device:CPU:0" in err
    with tf.Graph().as_default(), tf.Session() as s:
        s.run(tf.constant(1.0, name="quiet"))
    assert "quiet" not in capfd.readouterr().err


def test_traceback_filtering_switch_as_tf():
    assert tf.debugging.is_traceback_filtering_enabled() is True
    try:
        assert tf.debugging.disable_traceback_filtering() is None
        assert tf.debugging.is_traceback_filtering_enabled() is False
    finally:
        assert tf.debugging.enable_traceback_filtering() is None
    assert tf.debugging.is_traceback_filtering_enabled() is True


def test_debugging_namespace_keeps_its_other_names():
    for name in ("assert_equal", "assert_all_finite", "Assert", "check_numerics", "is_nan"):
        assert callable(getattr(tf.debugging, name))


def test_user_ops_my_fact_as_tf():
    with tf.Graph().as_default():
        fact = tf.user_ops.my_fact()
        assert (fact.op.type, fact.op.name, fact.dtype) == ("Fact", "Fact", tf.string)
        assert fact.shape.ndims is None
        assert tf.user_ops.my_fact().op.name == "Fact_1"
        with tf.Session() as s:
            assert s.run(fact) == b"0! == 1"


def test_sysconfig_names_asyncflow():
    import os

    lib = tf.sysconfig.get_lib()
    assert lib == os.path.dirname(os.path.abspath(tf.__file__))
    assert tf.sysconfig.get_include() == os.path.join(lib, "include")
    assert tf.sysconfig.get_compile_flags() == [
        f"-I{lib}/include",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
        "--std=c++17",
        "-DEIGEN_MAX_ALIGN_BYTES=64",
    ]
    assert tf.sysconfig.get_link_flags() == [f"-L{lib}"]
    info = tf.sysconfig.get_build_info()
    assert list(info)[:3] == ["is_cuda_build", "is_rocm_build", "is_tensorrt_build"]
    assert info["is_cuda_build"] == tf.test.is_built_with_cuda()
    assert (tf.sysconfig.CXX11_ABI_FLAG, tf.sysconfig.CXX_VERSION) == (1, 201703)
    assert tf.sysconfig.MONOLITHIC_BUILD == 0


def test_resource_loader_as_tf(tmp_path):
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    rl = tf.resource_loader
    assert rl.get_data_files_path() == here
    assert rl.get_path_to_datafile("data.txt") == os.path.join(here, "data.txt")
    root = rl.get_root_dir_with_all_resources()
    assert root == tf.sysconfig.get_lib()
    assert rl.readahead_file_path("/x/y.txt") == "/x/y.txt"
    assert rl.readahead_file_path("/x/y.txt", "1M") == "/x/y.txt"
    (tmp_path / "data.txt").write_bytes(b"hello\n")
    assert rl.load_resource(str(tmp_path / "data.txt")) == b"hello\n"
    assert rl.load_resource("__init__.py").startswith(b'"""')
    with pytest.raises(FileNotFoundError) as e:
        rl.load_resource("nope/x.txt")
    assert str(e.value) == (
        f"[Errno 2] No such file or directory: '{os.path.join(root, 'nope/x.txt')}'"
    )


# -- enable_check_numerics (graph mode; recorded from TF 2.21) -----------------------------


@pytest.fixture
def checking():
    tf.debugging.enable_check_numerics()
    try:
        yield
    finally:
        tf.debugging.disable_check_numerics()


def _checked_types(graph):
    checked = {o.inputs[0].op for o in graph.get_operations() if o.type == "CheckNumericsV2"}
    return {
        o.type: o in checked
        for o in graph.get_operations()
        if o.type != "CheckNumericsV2" and any(t.dtype.is_floating for t in o.outputs)
    }


def _bad(e):
    return [line for line in e.message.split("\n") if "Tensor had" in line or "!!!" in line]


def _detected(op_type, kinds, index=0, outputs=1):
    return [
        f'!!! Detected Infinity or NaN in output {index} of graph op "{op_type}" '
        f"(# of outputs: {outputs}) !!!",
        f" : Tensor had {kinds} values",
    ]


def test_check_numerics_checks_ops_that_can_make_nan_or_inf_as_tf(checking):
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2], name="x")
        i = tf.placeholder(tf.int32, [2], name="i")
        tf.log(x)
        tf.identity(x), tf.concat([x, x], 0), tf.expand_dims(x, 0), tf.reshape(x, [1, 2])
        tf.maximum(x, 0.0), tf.minimum(x, 0.0), tf.fill([2], 1.0), tf.transpose([x])
        tf.slice(x, [0], [1]), tf.unstack(x), tf.squeeze([x]), x[0:1]
        tf.gather(x, [0]), x + 1.0, tf.cast(i, tf.float32), i + 1, tf.nn.relu(x)
        tf.reduce_mean(x), tf.stack([x, x]), tf.sqrt(x), x / 2.0, tf.where(x > 0, x, x)
        tf.tile(x, [2]), tf.square(x), tf.one_hot(i, 3), tf.cumsum(x), tf.split(x, 2)
        tf.pad(x, [[1, 1]]), tf.reverse(x, [0]), tf.stop_gradient(x)
        tf.placeholder_with_default(1.0, [])
        tf.cond(tf.constant(True), lambda: x + 1.0, lambda: x)
        tf.while_loop(lambda k, a: k < 2, lambda k, a: (k + 1, a * 2.0), [0, x])
        got = _checked_types(g)
    # TF 2.21: True where the op's floating outputs got a CheckNumericsV2.
    assert got == {
        "AddV2": True, "Cast": True, "ConcatV2": False, "Const": True, "Cumsum": True,
        "Enter": False, "Exit": False, "ExpandDims": False, "Fill": False, "GatherV2": True,
        "Identity": False, "Log": True, "Maximum": False, "Mean": True, "Merge": False,
        "Minimum": False, "Mul": True, "NextIteration": False, "OneHot": True, "Pack": True,
        "Pad": True, "Placeholder": True, "PlaceholderWithDefault": True, "RealDiv": True,
        "Relu": True, "Reshape": False, "ReverseV2": True, "Select": True, "Slice": False,
        "Split": True, "Sqrt": True, "Square": True, "Squeeze": False, "StopGradient": True,
        "StridedSlice": False, "Switch": False, "Tile": True, "Transpose": False,
        "Unpack": False,
    }  # fmt: skip


def test_check_numerics_fails_the_step_as_tf(checking):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.log(x, name="log")
        m = tf.multiply(y, 2.0, name="m")
        grad = tf.gradients(tf.reduce_sum(y), x)[0]
        c = tf.cond(tf.constant(True), lambda: x + 1.0, lambda: x)
        w = tf.while_loop(lambda k, a: k < 2, lambda k, a: (k + 1, a * 2.0), [0, x])[1]
        assert [t.name for t in tf.add(m, 1.0).op.inputs] == [
            "m/CheckNumericsV2_1:0",
            "Add/CheckNumericsV2:0",
        ]
        with tf.Session() as s:
            assert s.run(m, {x: [1.0, 2.0]}).tolist() == pytest.approx([0.0, 1.3862944])
            cases = [
                (m, [0.0, 1.0], _detected("Log", "-Inf")),
                (m, [-1.0, 1.0], _detected("Log", "NaN")),
                (y, [0.0, 2.0], _detected("Log", "-Inf")),  # the fetch reads the check
                (grad, [0.0, 2.0], _detected("Reciprocal", "+Inf")),
                (c, [np.inf, 2.0], _detected("AddV2", "+Inf")),
                (w, [3e38, 2.0], _detected("Mul", "+Inf")),
            ]
            for fetch, feed, lines in cases:
                with pytest.raises(tf.errors.InvalidArgumentError) as e:
                    s.run(fetch, {x: feed})
                assert _bad(e.value) == lines


def test_check_numerics_v2_kinds_as_tf():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        c = tf.debugging.check_numerics(x, "msg")  # (V1: passes finite values through)

        c2 = check_ops.check_numerics_v2(x, "msg")
        g = tf.gradients(c2, x)[0]
        assert g.op.type == "CheckNumericsV2"
        assert g.op.get_attr("message") == (
            b"Not a number (NaN) or infinity (Inf) values detected in gradient. b'msg'"
        )
        with tf.Session() as s:
            assert s.run(c, {x: [1.0]}).tolist() == [1.0]
            # TF 2.21's CheckNumericsV2 words.
            for value, kinds in [
                ([-np.inf], "-Inf"),
                ([np.inf], "+Inf"),
                ([np.nan], "NaN"),
                ([-np.inf, np.inf], "-Inf and +Inf"),
                ([np.inf, np.nan], "+Inf and NaN"),
                ([-np.inf, np.nan], "-Inf and NaN"),
                ([-np.inf, np.inf, np.nan], "-Inf, +Inf, and NaN"),
            ]:
                with pytest.raises(tf.errors.InvalidArgumentError) as e:
                    s.run(c2, {x: value})
                assert f"msg : Tensor had {kinds} values" in e.value.message


def test_check_numerics_message_names_the_op_as_tf(checking):
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2], name="x")
        tf.log(x, name="log")
        tf.multiply(x, x, name="m")
        tf.split(x, 2, name="sp")
        head = {
            o.name: o.get_attr("message").decode().split("  Stack trace")[0]
            for o in g.get_operations()
            if o.type == "CheckNumericsV2"
        }
    x_repr = 'Tensor("x:0", shape=(2,), dtype=float32)'
    common = (
        '\n\n!!! Detected Infinity or NaN in output {} of graph op "{}" (# of outputs: {}) '
        "!!!\n  dtype: <dtype: 'float32'>\n  shape: {}\n\n"
    )
    assert head["x/CheckNumericsV2"] == common.format(0, "Placeholder", 1, "(2,)")
    assert head["log/CheckNumericsV2"] == (
        common.format(0, "Log", 1, "(2,)") + f"  Input tensor: {x_repr}\n\n"
    )
    assert head["m/CheckNumericsV2"] == common.format(0, "Mul", 1, "(2,)") + (
        f"  Input tensors (2):\n         0: {x_repr}\n         1: {x_repr}\n\n"
    )
    split_inputs = (
        '  Input tensors (2):\n         0: Tensor("sp/split_dim:0", shape=(), dtype=int32)\n'
        f"         1: {x_repr}\n\n"
    )
    assert head["sp/CheckNumericsV2"] == common.format(0, "Split", 2, "(1,)") + split_inputs
    assert head["sp/CheckNumericsV2_1"] == common.format(1, "Split", 2, "(1,)") + split_inputs


def test_check_numerics_stack_marks_user_code_and_keeps_the_limit():
    tf.debugging.enable_check_numerics(stack_height_limit=2, path_length_limit=20)
    try:
        with tf.Graph().as_default() as g:
            tf.log(tf.placeholder(tf.float32, [2], name="x"), name="log")
            text = g.get_operation_by_name("log/CheckNumericsV2").get_attr("message").decode()
    finally:
        tf.debugging.disable_check_numerics()
    stack = text.split('  Stack trace of op\'s creation ("->": inferred user code):\n')[1]
    lines = stack.split("\n")
    assert lines[0].startswith("    + ... (Omitted ") and lines[0].endswith(" frames)")
    assert len([line for line in lines if line.startswith("    + ...")]) == 3
    assert all(len(line.split(" (L")[0]) <= len("    + ...") + 20 for line in lines[1:4:2])
    tf.debugging.enable_check_numerics()
    try:
        with tf.Graph().as_default() as g:
            tf.log(tf.placeholder(tf.float32, [2], name="x"), name="log")
            text = g.get_operation_by_name("log/CheckNumericsV2").get_attr("message").decode()
    finally:
        tf.debugging.disable_check_numerics()
    assert f"{__file__[-47:]} (L" in text
    assert " -> |   \n" in text and text.endswith("\n\n")


def test_disable_check_numerics_as_tf():
    tf.debugging.enable_check_numerics()
    tf.debugging.enable_check_numerics()  # (twice: still one check an output)
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.log(x, name="log")
        tf.debugging.disable_check_numerics()
        n = tf.add(y, 1.0, name="after")
        assert [t.name for t in n.op.inputs] == ["log/CheckNumericsV2:0", "after/y:0"]
        checks = [o.name for o in g.get_operations() if o.type == "CheckNumericsV2"]
        assert checks == ["x/CheckNumericsV2", "log/CheckNumericsV2"]
        with tf.Session() as s:
            assert s.run(tf.identity(tf.log(x)), {x: [0.0, 1.0]})[0] == -np.inf


def test_variables_work_while_checking(checking):
    # (TF 2.21 fails building a tf.Variable here; asyncflow leaves ref outputs unchecked.)
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        r = tf.get_variable("r", [2], initializer=tf.ones_initializer(), use_resource=True)
        step = tf.assign_add(v, [1.0, 1.0])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(step)
            assert s.run(v).tolist() == [2.0, 3.0]
            assert s.run(r + v).tolist() == [3.0, 4.0]


def test_dir_lists_tf_names():
    # TF 2.21's dir(tf.compat.v1.debugging).
    tf_names = """Assert assert_all_finite assert_equal assert_greater assert_greater_equal
    assert_integer assert_less assert_less_equal assert_near assert_negative
    assert_non_negative assert_non_positive assert_none_equal assert_positive
    assert_proper_iterable assert_rank assert_rank_at_least assert_rank_in
    assert_same_float_dtype assert_scalar assert_shapes assert_type check_numerics
    disable_check_numerics disable_traceback_filtering enable_check_numerics
    enable_traceback_filtering experimental get_log_device_placement is_finite is_inf is_nan
    is_non_decreasing is_numeric_tensor is_strictly_increasing
    is_traceback_filtering_enabled set_log_device_placement""".split()
    assert dir(tf.debugging) == tf_names
