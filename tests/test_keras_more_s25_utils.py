"""tf.keras.utils additions of s25 (to_ordinal, get_source_inputs, pad_sequences,
get_registered_object, Progbar's averaging and output, OrderedEnqueuer and
GeneratorEnqueuer) and the serialization names of tf.keras.saving.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1); Progbar's
timings vary, so they are masked in both.
"""

import contextlib
import io
import re

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras
U = K.utils


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.backend.clear_session()


def test_to_ordinal():
    assert U.to_ordinal([0, 2, 1, 3]).tolist() == [
        [0.0, 0.0, 0.0],
        [1.0, 1.0, 0.0],
        [1.0, 0.0, 0.0],
        [1.0, 1.0, 1.0],
    ]
    assert U.to_ordinal([[1], [2]], num_classes=4).tolist() == [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    assert U.to_ordinal(np.array([[0, 1], [2, 2]])).shape == (2, 2, 2)


def test_get_source_inputs_and_registered_objects():
    a = K.Input((3,), name="a")
    b = K.Input((2,), name="b")
    h = K.layers.Dense(2)(a)
    o = K.layers.Dense(1)(K.layers.concatenate([h, b]))
    assert [t.name for t in U.get_source_inputs(o)] == ["a:0", "b:0"]
    assert [t.name for t in U.get_source_inputs(h)] == ["a:0"]
    assert [t.name for t in U.get_source_inputs(a)] == ["a:0"]
    x = tf.constant([1.0])
    assert U.get_source_inputs(x) is x
    assert U.pad_sequences([[1, 2], [3]], maxlen=3).tolist() == [[0, 1, 2], [0, 0, 3]]
    assert U.get_registered_object("nothing") is None
    assert U.get_registered_object("x", custom_objects={"x": 5}) == 5
    assert U.get_registered_object("y", module_objects={"y": 6}) == 6

    @U.register_keras_serializable(package="S25")
    def myfn(x):
        return x

    assert U.get_registered_object("S25>myfn") is myfn
    assert K.saving.get_registered_object("S25>myfn") is myfn
    for name in (
        "custom_object_scope",
        "deserialize_keras_object",
        "get_custom_objects",
        "register_keras_serializable",
        "serialize_keras_object",
    ):
        assert getattr(K.saving, name) is getattr(U, name)


def _masked(text):
    text = re.sub(r"\d+(us|ms|s)/", "T/", re.sub(r" - \d+s", " - Ts", text))
    return text.replace("ETA: 0s", "ETA: Ts")


def test_progbar_values_and_output():
    p = U.Progbar(10, verbose=0, stateful_metrics=["acc"])
    p.update(2, [("loss", 1.0), ("acc", 0.5)])
    p.update(5, [("loss", 0.4), ("acc", 0.7)])
    p.add(5, [("loss", 0.1)])
    assert {k: [round(float(v), 5) for v in p._values[k]] for k in p._values} == {
        "acc": [0.7, 1.0],
        "loss": [3.7, 10.0],
    }
    assert p._seen_so_far == 10
    outs = []
    for verbose in (1, 2):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            p = U.Progbar(20, verbose=verbose, interval=0.0, stateful_metrics=["acc"])
            p.update(5, [("loss", 1.0), ("acc", 0.25)])
            p.update(20, [("loss", 0.0005), ("acc", 0.5)])
        outs.append(_masked(out.getvalue()))
    # Recorded from TF 2.21 (on Linux Keras always redraws in place).
    first = " 5/20 [======>.......................] - ETA: Ts - loss: 1.0000 - acc: 0.2500"
    assert outs[0] == (
        "\r" + first + "\b" * len(first) + "\r20/20 [==============================] - Ts T/step"
        " - loss: 0.2504 - acc: 0.5000\n"
    )
    assert outs[1] == "20/20 - Ts - loss: 0.2504 - acc: 0.5000 - T/epoch - T/step\n"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        U.Progbar(None, verbose=1, interval=0.0).update(3, [("x", -2.0)])
    assert _masked(out.getvalue()) == "\r      3/Unknown - Ts T/step - x: -2.0000"


class _Seq(U.Sequence):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return i * 10

    def on_epoch_end(self):
        pass


def test_enqueuers():
    e = U.OrderedEnqueuer(_Seq())
    e.start(workers=1, max_queue_size=4)
    g = e.get()
    assert [next(g) for _ in range(7)] == [0, 10, 20, 0, 10, 20, 0]
    assert e.is_running()
    e.stop()
    assert not e.is_running()
    ge = U.GeneratorEnqueuer(i * i for i in range(5))
    ge.start()
    assert list(ge.get()) == [0, 1, 4, 9, 16]
    ge.stop()

    def failing():
        yield 1
        raise KeyError("boom")

    ge = U.GeneratorEnqueuer(failing())
    ge.start()
    got = ge.get()
    assert next(got) == 1
    with pytest.raises(KeyError):
        next(got)


def test_interactive_logging_and_legacy(caplog):
    # TF 2.21: interactive logging on by default; legacy serialization of l2(0.5) is
    # {"class_name": "L2", "config": {"l2": 0.5}}.
    assert U.is_interactive_logging_enabled()
    U.disable_interactive_logging()
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), caplog.at_level("INFO", logger="asyncflow.keras"):
            U.Progbar(2, verbose=2).update(2, [("loss", 1.0)])
        assert out.getvalue() == ""
        assert "loss: 1.0000" in caplog.text
        assert not U.is_interactive_logging_enabled()
    finally:
        U.enable_interactive_logging()
    assert U.legacy.serialize_keras_object(K.regularizers.l2(0.5)) == {
        "class_name": "L2",
        "config": {"l2": 0.5},
    }
    # (TF 2.21: the legacy deserializer keeps Keras 2's signature; utils' is the new one)
    restored = U.legacy.deserialize_keras_object(
        {"class_name": "L2", "config": {"l2": 0.5}}, {"L2": K.regularizers.L2}
    )
    assert restored.get_config() == {"l2": 0.5}
