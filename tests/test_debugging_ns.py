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
