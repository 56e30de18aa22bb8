"""tf.debugging's own names (assert_shapes, the switches) and tf.sysconfig,
tf.resource_loader, tf.user_ops, as TF 2.21's tf.compat.v1.

assert_shapes' errors and run-time messages were recorded from TF 2.21 (graph mode).
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf

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
