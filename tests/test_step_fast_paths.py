"""The common step's shortcuts give what the general paths give (asyncflow.session).

A fetch that is one Tensor or Operation, or a plain list or tuple of them, skips
`_FetchMapper`'s walk; a feed key that is a Tensor of the graph skips the lookup; a fed
NumPy array of the tensor's dtype (native byte order) and an accepted shape is taken as
it is.  Everything else takes the general paths, whose results and errors these tests
compare against (TF 1 behaviour: a list fetch gives a list, a tuple a tuple, an
Operation None; a bad shape is a ValueError naming both shapes).
"""

import asyncio

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops.array_ops import constant, placeholder

pytestmark = pytest.mark.usefixtures("graph")


def test_leaf_list_and_tuple_fetches_keep_their_kind(sess):
    a = constant(1.0, name="a")
    b = constant([2, 3], dtype=af.int32, name="b")
    op = af.no_op()
    assert sess.run(a) == 1.0
    assert sess.run(op) is None
    first = sess.run([a, b, op])
    second = sess.run([a, b, op])
    assert type(first) is list and first is not second
    assert first[0] == 1.0 and first[1].tolist() == [2, 3] and first[2] is None
    out = sess.run((b, a))
    assert type(out) is tuple and out[0].tolist() == [2, 3] and out[1] == 1.0
    assert sess.run([]) == [] and sess.run(()) == ()


def test_leaf_fetch_errors_as_the_general_path():
    g1, g2 = af.Graph(), af.Graph()
    with g1.as_default():
        a = constant(1.0)
    with g2.as_default():
        b = constant(2.0)
        c = constant(3.0)
        g2.prevent_fetching(c.op)
    with af.Session(graph=g2) as s:
        with pytest.raises(ValueError, match="is not an element of this graph"):
            s.run(a)
        with pytest.raises(ValueError, match="is not an element of this graph"):
            s.run([b, a])
        with pytest.raises(ValueError, match="marked as not fetchable"):
            s.run([b, c])
        assert s.run([b]) == [2.0]


def test_fed_arrays_of_the_tensor_dtype_and_others(sess):
    x = placeholder(af.float32, [None, 2])
    y = x * 2.0
    own = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(sess.run(y, {x: own}), own * 2)
    # Another byte order, another dtype, a list: converted as before.
    swapped = own.astype(own.dtype.newbyteorder(">"))
    np.testing.assert_array_equal(sess.run(y, {x: swapped}), own * 2)
    np.testing.assert_array_equal(sess.run(y, {x: own.astype(np.float64)}), own * 2)
    np.testing.assert_array_equal(sess.run(y, {x: own.tolist()}), own * 2)
    # Fetching the fed tensor gives a copy, never the caller's array.
    got = sess.run(x, {x: own})
    assert got is not own
    np.testing.assert_array_equal(got, own)
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor"):
        sess.run(y, {x: np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        sess.run(y, {x: np.zeros((2, 3), np.float32)})


def test_fed_key_errors_as_the_general_path(graph):
    x = placeholder(af.float32, [])
    z = placeholder(af.float32, [])
    y = x + z
    graph.prevent_feeding(z)
    other = af.Graph()
    with other.as_default():
        w = placeholder(af.float32, [])
    with af.Session(graph=graph) as s:
        with pytest.raises(ValueError, match="may not be fed"):
            s.run(y, {x: np.float32(1), z: np.float32(2)})
        with pytest.raises(TypeError, match="Cannot interpret feed_dict key"):
            s.run(x, {w: np.float32(1)})


def test_string_feed_of_an_object_array_converts(sess):
    s = placeholder(af.string, [2])
    out = sess.run(s, {s: np.array(["a", b"b"], dtype=object)})
    assert out.tolist() == [b"a", b"b"]


def test_arun_takes_the_same_shortcuts():
    x = placeholder(af.float32, [2])
    y = x + 1.0
    op = af.no_op()

    async def main():
        async with af.Session() as s:
            one = await s.arun(y, {x: np.ones(2, np.float32)})
            both = await s.arun([y, op], {x: np.ones(2, np.float64)})
            return one, both

    one, both = asyncio.run(main())
    np.testing.assert_array_equal(one, [2.0, 2.0])
    assert type(both) is list and both[1] is None
    np.testing.assert_array_equal(both[0], [2.0, 2.0])
