"""af.print (TF's tf.print / PrintV2 + StringFormat): the text TensorFlow 2.21 printed
for the same calls (recorded with tf.compat.v1 writing to file:// streams)."""

from __future__ import annotations

import logging

import pytest

import asyncflow as af

EXPECTED = {
    "scalar": "3\n",
    "vec10": "[0 1 2 ... 7 8 9]\n",
    "float": "[1.5 -2.25 3]\n",
    "mat": "[[0 1 2 3]\n [4 5 6 7]\n [8 9 10 11]]\n",
    "mixed": "loss: 0.25 step 7\n",
    "strtensor": "hello\n",
    "strvec": '["a" "b"]\n',
    "bool": "[1 0]\n",
    "big3d": "[[[0 1 2 3 4]\n  [5 6 7 8 9]\n  [10 11 12 13 14]\n  [15 16 17 18 19]]\n\n"
    " [[20 21 22 23 24]\n  [25 26 27 28 29]\n  [30 31 32 33 34]\n  [35 36 37 38 39]]\n\n"
    " [[40 41 42 43 44]\n  [45 46 47 48 49]\n  [50 51 52 53 54]\n  [55 56 57 58 59]]]\n",
    "f64": "[0.1 1e-07 123456789]\n",
    "half": "0.333333343\n",
    "summarize2": "[0 1 ... 8 9]|[[1 2]\n [3 4]]!\n",
    "all": "[0 1 2 3 4 5 6 7 8 9]\n",
    "dict": "{'a': [1 2 3], 'b': [[\"ab\" \"c\"], 3]}\n",
    "unsorted": "{'a': 2, 'b': 1}\n",
    "nested": "x [1, 'q', (2,)] {'k': 'v'}\n",
    "brace": "['{}', 5]\n",
}

CASES = {
    "scalar": lambda: [af.constant(3)],
    "vec10": lambda: [af.range(10)],
    "float": lambda: [af.constant([1.5, -2.25, 3.0])],
    "mat": lambda: [af.reshape(af.range(12), [3, 4])],
    "mixed": lambda: ["loss:", af.constant(0.25), "step", 7],
    "strtensor": lambda: [af.constant("hello")],
    "strvec": lambda: [af.constant(["a", "b"])],
    "bool": lambda: [af.constant([True, False])],
    "big3d": lambda: [af.reshape(af.range(60), [3, 4, 5])],
    "f64": lambda: [af.constant([0.1, 1e-7, 123456789.0], af.float64)],
    "half": lambda: [af.constant(1 / 3, af.float32)],
    # structures holding tensors: their str() with the values in place, keys sorted
    "dict": lambda: [{"a": af.constant([1, 2, 3]), "b": [af.constant([b"ab", b"c"]), 3]}],
    "unsorted": lambda: [{"b": af.constant(1), "a": af.constant(2)}],
    "nested": lambda: ["x", [af.constant(1), "q", (af.constant(2),)], {"k": "v"}],
    "brace": lambda: [["{}", af.constant(5)]],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_print_matches_tf(tmp_path, name):
    assert _printed_in(tmp_path, CASES[name]) == EXPECTED[name]


def _printed_in(tmp_path, make, **kwargs):
    path = tmp_path / "out.txt"
    with af.Graph().as_default():
        op = af.print(*make(), output_stream=f"file://{path}", **kwargs)
        with af.Session() as s:
            s.run(op)
    return path.read_text()


def test_summarize_sep_end(tmp_path):
    two = lambda: [af.range(10), af.constant([[1, 2], [3, 4]])]  # noqa: E731
    assert _printed_in(tmp_path, two, summarize=2, sep="|", end="!\n") == EXPECTED["summarize2"]
    (tmp_path / "out.txt").unlink()
    assert _printed_in(tmp_path, lambda: [af.range(10)], summarize=-1) == EXPECTED["all"]


def test_streams(capsys, caplog):
    with af.Graph().as_default():
        out = af.print("to", af.constant(1), output_stream=__import__("sys").stdout)
        err = af.print(af.constant([1.0, 2.0]))
        log = af.print("logged", output_stream=af.logging.info)
        with af.Session() as s:
            s.run(out)
            s.run(err)
            with caplog.at_level(logging.INFO, logger="asyncflow"):
                s.run(log)
    captured = capsys.readouterr()
    assert captured.out == "to 1\n" and captured.err == "[1 2]\n"
    assert [r.getMessage() for r in caplog.records] == ["logged"]
    with pytest.raises(ValueError):
        af.print("x", output_stream=object())


def test_strings_format():
    with af.Graph().as_default():
        t = af.strings.format("x={} y={}", [af.constant(1), af.range(8)])
        with af.Session() as s:
            assert s.run(t) == b"x=1 y=[0 1 2 ... 5 6 7]"
