import builtins

import numpy as np
import pytest

from asyncflow import dtypes
from asyncflow.dtypes import as_dtype, convert_to_numpy, infer_dtype

# name, enum, numpy type, floating, integer, complex, unsigned
TABLE = [
    ("float16", 19, np.float16, True, False, False, False),
    ("float32", 1, np.float32, True, False, False, False),
    ("float64", 2, np.float64, True, False, False, False),
    ("int8", 6, np.int8, False, True, False, False),
    ("int16", 5, np.int16, False, True, False, False),
    ("int32", 3, np.int32, False, True, False, False),
    ("int64", 9, np.int64, False, True, False, False),
    ("uint8", 4, np.uint8, False, True, False, True),
    ("uint16", 17, np.uint16, False, True, False, True),
    ("uint32", 22, np.uint32, False, True, False, True),
    ("uint64", 23, np.uint64, False, True, False, True),
    ("bool", 10, np.bool_, False, False, False, False),
    ("string", 7, np.object_, False, False, False, False),
    ("complex64", 8, np.complex64, False, False, True, False),
    ("complex128", 18, np.complex128, False, False, True, False),
]


@pytest.mark.parametrize("name,enum,np_type,fl,integer,cplx,unsigned", TABLE)
def test_dtype_table(name, enum, np_type, fl, integer, cplx, unsigned):
    d = getattr(dtypes, name)
    assert (d.name, d.as_datatype_enum, d.as_numpy_dtype) == (name, enum, np_type)
    assert (d.is_floating, d.is_integer, d.is_complex, d.is_unsigned) == (
        fl,
        integer,
        cplx,
        unsigned,
    )
    assert d.is_bool == (name == "bool") and d.is_numpy_compatible
    assert repr(d) == f"tf.{name}" and d.base_dtype is d
    for key in (name, enum, d, np_type, np.dtype(np_type)):
        assert as_dtype(key) is d
    assert d == name and hash(d) == hash(as_dtype(name)) and d.is_compatible_with(name)
    assert d.size == np.dtype(np_type).itemsize


def test_aliases_and_python_types():
    assert dtypes.half is dtypes.float16 and dtypes.double is dtypes.float64
    assert dtypes.bool is dtypes.bool_ and dtypes.bool.name == "bool"
    for alias, d in [
        ("float", dtypes.float32),
        ("double", dtypes.float64),
        ("half", dtypes.float16),
    ]:
        assert as_dtype(alias) is d
    pytypes = [
        (float, dtypes.float32),
        (int, dtypes.int32),
        (builtins.bool, dtypes.bool),
        (str, dtypes.string),
        (bytes, dtypes.string),
        (complex, dtypes.complex128),
    ]
    for py, d in pytypes:
        assert as_dtype(py) is d
    assert as_dtype(np.dtype("U3")) is dtypes.string


@pytest.mark.parametrize("bad", ["float31", [1], None, 99])
def test_as_dtype_rejects(bad):
    with pytest.raises(TypeError):
        as_dtype(bad)


def test_equality_and_min_max():
    assert dtypes.float32 != dtypes.float64 and dtypes.float32 != "nonsense"
    assert dtypes.float32 != None  # noqa: E711
    assert len({dtypes.float32, as_dtype("float32"), dtypes.int32}) == 2
    assert dtypes.complex64.real_dtype is dtypes.float32
    assert dtypes.complex128.real_dtype is dtypes.float64
    assert dtypes.int32.real_dtype is dtypes.int32
    assert (dtypes.int8.min, dtypes.int8.max, dtypes.uint8.min) == (-128, 127, 0)
    assert dtypes.float32.max == float(np.finfo(np.float32).max)
    for d in (dtypes.bool, dtypes.string, dtypes.complex64):
        with pytest.raises(TypeError):
            _ = d.min


def test_bfloat16():
    bf = dtypes.bfloat16
    assert (bf.name, bf.as_datatype_enum, bf.is_floating, bf.size) == ("bfloat16", 14, True, 2)
    assert repr(bf) == "tf.bfloat16" and as_dtype("bfloat16") is bf
    try:
        import ml_dtypes
    except ImportError:
        assert not bf.is_numpy_compatible
        with pytest.raises(TypeError, match="ml_dtypes"):
            _ = bf.as_numpy_dtype
    else:
        assert bf.as_numpy_dtype is ml_dtypes.bfloat16


INFER = [
    (1.0, dtypes.float32),
    ([1, 2.5], dtypes.float32),
    ([[1.0], [2.0]], dtypes.float32),
    (1, dtypes.int32),
    ([1, 2**31], dtypes.int64),
    (-(2**31), dtypes.int32),
    (True, dtypes.bool),
    ("a", dtypes.string),
    ([b"a", "b"], dtypes.string),
    (1 + 2j, dtypes.complex128),
    ([1, 2j], dtypes.complex128),
    (np.zeros(2, np.float64), dtypes.float64),
    (np.int16(3), dtypes.int16),
    ([], dtypes.float32),
]


@pytest.mark.parametrize("value,expected", INFER)
def test_infer_and_convert(value, expected):
    assert infer_dtype(value) is expected
    arr = convert_to_numpy(value)
    assert isinstance(arr, np.ndarray) and arr.dtype == expected.as_numpy_dtype
    assert arr.shape == np.shape(value)


def test_strings_are_object_arrays_of_bytes():
    arr = convert_to_numpy([["héllo", b"x"]])
    assert arr.dtype == object and arr.shape == (1, 2)
    assert arr.tolist() == [["héllo".encode(), b"x"]]
    assert convert_to_numpy(np.array(["ab"]), dtypes.string).tolist() == [b"ab"]


CONVERT_OK = [
    (1, dtypes.float32, np.float32(1)),
    ([1, 2], dtypes.float64, np.array([1.0, 2.0])),
    (3, dtypes.int64, np.int64(3)),
    (True, dtypes.bool, np.True_),
    (1.5, dtypes.complex64, np.complex64(1.5)),
    (np.array([1.7]), dtypes.int32, np.array([1], np.int32)),  # NumPy input: plain cast
]


@pytest.mark.parametrize("value,dtype,expected", CONVERT_OK)
def test_convert_with_dtype(value, dtype, expected):
    arr = convert_to_numpy(value, dtype)
    assert arr.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(arr, expected)


# TF 2.21 in graph mode (as TF1) wraps integers modulo the target width; recorded there:
# constant(300, uint8) -> 44, constant(-1, uint32) -> 4294967295, constant(2**40, int32)
# -> 0, constant(-1, uint64) -> 2**64 - 1, constant(2**63, int64) -> -2**63,
# constant([-1, 2], uint8) -> [255, 2]; 2**64 for uint64 raises (OverflowError there).
@pytest.mark.parametrize(
    "value,dtype,expected",
    [
        (300, dtypes.uint8, 44),
        (-1, dtypes.uint32, 4294967295),
        (2**40, dtypes.int32, 0),
        (-1, dtypes.uint64, 2**64 - 1),
        (2**63, dtypes.int64, -(2**63)),
        ([-1, 2], dtypes.uint8, [255, 2]),
    ],
)
def test_convert_wraps_integers_as_tf(value, dtype, expected):
    arr = convert_to_numpy(value, dtype)
    assert arr.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(arr, np.asarray(expected, dtype=dtype.as_numpy_dtype))


@pytest.mark.parametrize(
    "value,dtype",
    [
        (1.5, dtypes.int32),
        ([1, 2.0], dtypes.int32),
        (2**64, dtypes.uint64),
        (1, dtypes.bool),
        ("a", dtypes.float32),
        (1, dtypes.string),
        (1j, dtypes.float32),
        (object(), None),
        (["a", 1], None),
        (np.array([b"a"], dtype=object), dtypes.int32),
        ([2**70], None),  # (past uint64: TF's TypeError)
        ([1.0, None], dtypes.float32),
    ],
)
def test_convert_type_errors(value, dtype):
    with pytest.raises(TypeError):
        convert_to_numpy(value, dtype)


@pytest.mark.parametrize("value", [[[1, 2], [3]], [1, [2]], None])
def test_convert_value_errors(value):
    with pytest.raises(ValueError):
        convert_to_numpy(value)


@pytest.mark.parametrize(
    "value,dtype",
    [
        ([[1, 2], [3, 4]], dtypes.float32),
        ([[1.5, 2.0]], dtypes.float64),
        ([1, 2], dtypes.complex64),
        ([True, False], dtypes.bool),
        ([True, 2], dtypes.int32),
        ([[np.float64(1.5)], [2]], dtypes.float16),
        ([300, -1], dtypes.uint8),
    ],
)
def test_typed_lists_convert_as_numpy_casts(value, dtype):
    # The one-pass path for nested lists of a known dtype gives NumPy's cast of them
    # (values in range; out-of-range ints wrap as TF: 300 -> 44, -1 -> 255).
    want = np.asarray([int(v) % 256 for v in value]) if dtype == dtypes.uint8 else value
    arr = convert_to_numpy(value, dtype)
    assert arr.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(arr, np.asarray(want).astype(dtype.as_numpy_dtype))


def test_defaulted_int32_inputs_take_int64_for_large_ints():
    # TF 2.21: reshape(x, [50000**2]) has an int64 shape input (static shape
    # [2500000000]) although Tshape defaults to int32; an explicit int32 wraps instead.
    import asyncflow as af
    from asyncflow.dtypes import fits_without_wrapping

    with af.Graph().as_default():
        y = af.reshape(af.placeholder(af.bool), [50000**2])
        assert y.op.inputs[1].dtype == af.int64
        assert y.shape.as_list() == [50000**2]
    assert fits_without_wrapping([1, 2], dtypes.int32)
    assert not fits_without_wrapping([1, 2**40], dtypes.int32)
    assert not fits_without_wrapping(-1, dtypes.uint8)
    assert fits_without_wrapping([1.5], dtypes.int32)  # not an integer question
