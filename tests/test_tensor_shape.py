import operator

import pytest

from asyncflow import tensor_shape as ts
from asyncflow.tensor_shape import Dimension, TensorShape

D = Dimension

ARITH = [
    (operator.add, 2, 3, 5),
    (operator.sub, 5, 3, 2),
    (operator.mul, 2, 3, 6),
    (operator.floordiv, 7, 2, 3),
    (operator.mod, 7, 2, 1),
]


@pytest.mark.parametrize("op,a,b,expected", ARITH)
def test_dimension_arithmetic(op, a, b, expected):
    assert op(D(a), D(b)).value == expected
    assert op(D(a), b).value == expected and op(a, D(b)).value == expected
    assert op(D(a), D(None)).value is None and op(None, D(b)).value is None


def test_dimension_comparisons():
    assert (D(2) == 2) is True and (D(2) == D(3)) is False and (D(2) != 3) is True
    assert (D(None) == 2) is None and (D(2) != D(None)) is None
    assert (D(2) < 3) is True and (D(None) < 3) is None and (D(3) >= D(3)) is True
    assert D(2).__eq__("x") is NotImplemented


def test_dimension_basics():
    assert (repr(D(2)), repr(D(None)), str(D(2)), str(D(None))) == (
        "Dimension(2)",
        "Dimension(None)",
        "2",
        "?",
    )
    assert int(D(3)) == 3 and [0, 1, 2, 3][D(1)] == 1 and D(D(4)).value == 4
    assert D(2.0).value == 2
    assert ts.dimension_value(D(5)) == 5 and ts.dimension_value(7) == 7
    assert ts.dimension_value(None) is None
    with pytest.raises(TypeError):
        int(D(None))
    with pytest.raises(TypeError):
        D(2) / 2


@pytest.mark.parametrize("bad,exc", [(-1, ValueError), (1.5, ValueError), ("2", TypeError)])
def test_dimension_invalid(bad, exc):
    with pytest.raises(exc):
        D(bad)


@pytest.mark.parametrize(
    "a,b,compatible,merged",
    [(2, 2, True, 2), (2, None, True, 2), (None, 3, True, 3), (None, None, True, None),
     (2, 3, False, None)],
)  # fmt: skip
def test_dimension_merge(a, b, compatible, merged):
    assert D(a).is_compatible_with(b) is compatible
    if compatible:
        assert D(a).merge_with(D(b)).value == merged
    else:
        with pytest.raises(ValueError, match="Dimensions 2 and 3 are not compatible"):
            D(a).merge_with(b)


SHAPES = [
    # dims, ndims, str, repr, fully_defined, num_elements
    (None, None, "<unknown>", "TensorShape(None)", False, None),
    ([], 0, "()", "TensorShape([])", True, 1),
    ([3], 1, "(3,)", "TensorShape([Dimension(3)])", True, 3),
    ([2, None], 2, "(2, ?)", "TensorShape([Dimension(2), Dimension(None)])", False, None),
    ((2, 3, 4), 3, "(2, 3, 4)", "TensorShape([Dimension(2), Dimension(3), Dimension(4)])",
     True, 24),
]  # fmt: skip


@pytest.mark.parametrize("dims,ndims,s,r,full,n", SHAPES)
def test_shape_basics(dims, ndims, s, r, full, n):
    shape = TensorShape(dims)
    assert (shape.ndims, shape.rank, str(shape), repr(shape)) == (ndims, ndims, s, r)
    assert (shape.is_fully_defined(), shape.num_elements()) == (full, n)
    if dims is None:
        for fn in (len, list, TensorShape.as_list):
            with pytest.raises(ValueError):
                fn(shape)
        assert shape.dims is None and not shape
    else:
        assert len(shape) == ndims and shape.as_list() == list(dims)
        assert [d.value for d in shape] == list(dims) and repr(shape.dims) == repr(
            [D(d) for d in dims]
        )


def test_shape_construction_and_indexing():
    assert TensorShape(5).as_list() == [5]
    assert TensorShape([D(1), None]).as_list() == [1, None]
    s = TensorShape([1, 2, 3])
    assert isinstance(s[1], Dimension) and s[1].value == 2 and s[-1].value == 3
    assert s[1:].as_list() == [2, 3] and isinstance(s[:1], TensorShape)
    u = ts.unknown_shape()
    assert u[0].value is None and u[1:].rank is None and u[1:3].as_list() == [None, None]
    with pytest.raises(TypeError):
        hash(s)


def test_helpers():
    assert ts.scalar().as_list() == [] and ts.vector(3).as_list() == [3]
    assert ts.matrix(2, None).as_list() == [2, None]
    assert ts.unknown_shape().rank is None and ts.unknown_shape(2).as_list() == [None, None]
    assert ts.unknown_shape(ndims=1).as_list() == [None]
    assert ts.as_shape([1]) == TensorShape([1]) and ts.as_shape(s := TensorShape([1])) is s
    assert ts.dimension_at_index(TensorShape(None), 3).value is None
    assert ts.dimension_at_index([4, 5], 1).value == 5


@pytest.mark.parametrize(
    "a,b,merged",
    [
        ([2, None], [None, 3], [2, 3]),
        (None, [1, 2], [1, 2]),
        ([1, 2], None, [1, 2]),
        (None, None, None),
        ([], [], []),
    ],
)
def test_merge_ok(a, b, merged):
    out = TensorShape(a).merge_with(b)
    assert (out.as_list() if out.rank is not None else None) == merged
    assert TensorShape(a).is_compatible_with(b)
    TensorShape(a).assert_is_compatible_with(b)


@pytest.mark.parametrize(
    "a,b,msg",
    [
        ([2, 3], [3, 3], r"Shapes \(2, 3\) and \(3, 3\) are not compatible"),
        ([2], [2, 2], r"Shapes \(2,\) and \(2, 2\) are not compatible"),
    ],
)
def test_merge_conflict(a, b, msg):
    with pytest.raises(ValueError, match=msg):
        TensorShape(a).merge_with(b)
    assert not TensorShape(a).is_compatible_with(b)
    with pytest.raises(ValueError, match="are incompatible"):
        TensorShape(a).assert_is_compatible_with(b)


def test_rank_checks():
    s = TensorShape([2, None])
    assert s.with_rank(2) == s and ts.unknown_shape().with_rank(3).as_list() == [None] * 3
    assert s.with_rank_at_least(1) is s and s.with_rank_at_most(2) is s
    s.assert_has_rank(2)
    ts.unknown_shape().assert_has_rank(5)
    s.assert_same_rank([1, 1])
    checks = [
        (lambda: s.with_rank(3), r"Shape \(2, \?\) must have rank 3"),
        (lambda: s.with_rank_at_least(3), "must have rank at least 3"),
        (lambda: s.with_rank_at_most(1), "must have rank at most 1"),
        (lambda: s.assert_has_rank(1), "must have rank 1"),
        (lambda: s.assert_same_rank([1]), "must have the same rank"),
    ]
    for fn, msg in checks:
        with pytest.raises(ValueError, match=msg):
            fn()


def test_concatenate_and_specific():
    assert TensorShape([1]).concatenate([2, None]).as_list() == [1, 2, None]
    assert (TensorShape([1]) + [2]).as_list() == [1, 2]
    assert TensorShape([1]).concatenate(None).rank is None
    a, b = TensorShape([1, 2, None]), TensorShape([1, 3, None])
    assert a.most_specific_compatible_shape(b).as_list() == [1, None, None]
    assert a.most_specific_compatible_shape([1, 2]).rank is None


def test_equality():
    assert TensorShape([1, 2]) == [1, 2] and TensorShape([1, 2]) != TensorShape([2, 1])
    assert TensorShape([1, None]) == TensorShape([1, None])
    assert TensorShape(None) == TensorShape(None) and TensorShape(None) != TensorShape([])
    assert TensorShape([]) != [1]


BROADCAST = [
    ([2, 3], [3], [2, 3]),
    ([2, 1], [1, 4], [2, 4]),
    ([], [5, 6], [5, 6]),
    ([None], [1], [None]),
    ([None], [4], [4]),
    ([1], [None], [None]),
    ([None, 3], [None, 1], [None, 3]),
    ([0], [1], [0]),
    ([None], [0], [0]),
]


@pytest.mark.parametrize("a,b,expected", BROADCAST)
def test_broadcast_shape(a, b, expected):
    assert ts.broadcast_shape(TensorShape(a), TensorShape(b)).as_list() == expected
    assert ts.broadcast_shape(TensorShape(b), TensorShape(a)).as_list() == expected


def test_broadcast_unknown_rank_and_errors():
    assert ts.broadcast_shape(TensorShape(None), TensorShape([2])).rank is None
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        ts.broadcast_shape(TensorShape([2]), TensorShape([3]))
