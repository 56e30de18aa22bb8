"""The input worker's slot format (asyncflow/data/shm_wire.py): what `write` puts in a
slot `read` gives back, dtype, shape and bytes; a malformed header is refused, also one
that differs from a header `read` has seen before only in a checked field."""

import mmap

import numpy as np
import pytest

from asyncflow.data import shm_wire as w

pytestmark = pytest.mark.timeout(60)

SIZE = 1 << 16


def _slot(elem):
    buf = mmap.mmap(-1, SIZE)
    total, parts = w.layout(elem)
    w.write(buf, elem, parts, total)
    return buf, total


def _elems():
    rng = np.random.RandomState(0)
    return [
        (rng.randn(128, 64).astype(np.float32), np.arange(128, dtype=np.int64)),
        (np.array(3.5), np.zeros((2, 0, 3), np.int32), np.array([True, False])),
        (rng.randn(4, 1, 2, 1).astype(np.complex64),),
    ]


def test_round_trip_copies_out():
    for elem in _elems():
        buf, _ = _slot(elem)
        for _ in range(2):  # (the second read: its header's plan remembered)
            got = w.read(buf, SIZE)
            assert len(got) == len(elem)
            for a, b in zip(got, elem):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)
                assert a.flags.owndata and a.flags.writeable
        buf[w.HEAD.size + len(elem) * w.COMP.size :] = b"\x07" * (
            SIZE - w.HEAD.size - len(elem) * w.COMP.size
        )
        for a, b in zip(got, elem):  # copies: the slot's next use leaves them as they were
            np.testing.assert_array_equal(a, b)


def _comp_field(buf, k, index, value):
    """Rewrite field `index` of component k's header (COMP's fields, dims flattened)."""
    off = w.HEAD.size + k * w.COMP.size
    fields = list(w.COMP.unpack_from(buf, off))
    fields[index] = value
    w.COMP.pack_into(buf, off, *fields)


@pytest.mark.parametrize(
    "index, value",
    [
        (0, b"|O"),  # an object dtype
        (0, b"<f3"),  # not a dtype
        (1, w.MAX_RANK + 1),  # rank
        (3, 129),  # a dimension that does not match nbytes
        (3, -1),  # a negative dimension
        (3 + w.MAX_RANK, SIZE),  # offset past the bytes used
        (4 + w.MAX_RANK, 4),  # nbytes
    ],
)
def test_malformed_components_are_refused_even_after_a_good_read(index, value):
    elem = _elems()[0]
    buf, _ = _slot(elem)
    w.read(buf, SIZE)
    _comp_field(buf, 0, index, value)
    with pytest.raises(ValueError, match="malformed component 0"):
        w.read(buf, SIZE)


def test_malformed_element_headers_are_refused():
    elem = _elems()[0]
    buf, total = _slot(elem)
    w.read(buf, SIZE)
    assert w.read(buf, total)[0].shape == (128, 64)
    with pytest.raises(ValueError, match="malformed element header"):
        w.read(buf, total - 1)  # a slot smaller than the bytes used
    for magic, n, used in ((b"XXXX", 2, total), (w.MAGIC, w.MAX_COMPONENTS + 1, total)):
        w.HEAD.pack_into(buf, 0, magic, n, used)
        with pytest.raises(ValueError, match="malformed element header"):
            w.read(buf, SIZE)
    w.HEAD.pack_into(buf, 0, w.MAGIC, 2, 100)  # fewer bytes used than the components'
    with pytest.raises(ValueError, match="malformed component"):
        w.read(buf, SIZE)
