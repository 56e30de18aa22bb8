"""Check that TF's Keras loads the HDF5 files asyncflow's Keras writes, and computes the
same numbers from them.

Two halves, two interpreters (TF is never a dependency of asyncflow or its tests):
  .venv/bin/python tools/check_keras_h5_in_tf.py write DIR                 # asyncflow writes
  TF_USE_LEGACY_KERAS=1 /work/tfvenv/bin/python tools/check_keras_h5_in_tf.py check DIR
`write` leaves in DIR whole models (a compiled Sequential with batch norm after two Adam
steps; a two-output functional model with a loss list and RMSprop; a Sequential nested
in a functional model with SGD momentum; a Bidirectional LSTM + GRU model), a weights
file, and expected.json with asyncflow's predictions and its next two training steps;
`check` loads each with tf.keras.models.load_model / load_weights and compares.  The
result is recorded in docs/FORMATS.md.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures"))  # fmt: skip
import keras_saving_cases as cases  # noqa: E402

XR = np.linspace(-1, 1, 30, dtype=np.float32).reshape(2, 5, 3)
X1 = np.ones((3, 4), np.float32)
Y1 = np.ones((3, 1), np.float32)


def _steps(model, x, y, n=2):
    return [np.asarray(model.train_on_batch(x, y), np.float64).tolist() for _ in range(n)]


def _rnn_model(K):  # noqa: N803
    L = K.layers  # noqa: N806
    x = K.Input((5, 3), name="seqin")
    h = L.Bidirectional(L.LSTM(4, return_sequences=True, name="l"), name="bi")(x)
    return K.Model(x, L.Dense(2, name="o")(L.GRU(3, name="g")(h)), name="rnn")


def write(out: str) -> None:
    import asyncflow as tf

    K = tf.keras  # noqa: N806
    os.makedirs(out, exist_ok=True)
    expected = {}

    def session():
        graph = tf.Graph()
        sess = tf.Session(graph=graph)
        K.backend.set_session(sess)
        return graph.as_default(), sess

    ctx, sess = session()
    with ctx, sess:
        m = cases.seq_model(K)
        m.compile(K.optimizers.Adam(0.01), "mse", metrics=["mae"])
        cases.fill(m)
        _steps(m, cases.XS, cases.YS)
        m.save(os.path.join(out, "seq.h5"))
        expected["seq_pred"] = m.predict(cases.XS).tolist()
        expected["seq_steps"] = _steps(m, cases.XS, cases.YS)
    ctx, sess = session()
    with ctx, sess:
        m = cases.func_model(K)
        cases.fill(m)
        m.save_weights(os.path.join(out, "func_weights.h5"))
        expected["func_pred"] = [p.tolist() for p in m.predict([cases.XA, cases.XB])]
        cases.compile_multi(K, m)
        m.train_on_batch([cases.XA, cases.XB], [cases.YA, cases.YB])
        m.save(os.path.join(out, "multi.h5"))
        expected["multi_steps"] = _steps(m, [cases.XA, cases.XB], [cases.YA, cases.YB])
    ctx, sess = session()
    with ctx, sess:
        m = cases.nested_model(K)
        m.compile(K.optimizers.SGD(0.1, momentum=0.9), "mse")
        m.train_on_batch(X1, Y1)
        m.save(os.path.join(out, "nested.h5"))
        expected["nested_steps"] = _steps(m, X1, Y1)
    ctx, sess = session()
    with ctx, sess:
        m = _rnn_model(K)
        cases.fill(m)
        m.save(os.path.join(out, "rnn.h5"))
        expected["rnn_pred"] = m.predict(XR).tolist()
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


def check(out: str) -> None:
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()
    K = tf.keras  # noqa: N806
    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)

    def report(what, got, want):
        diff = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(got, want))
        print(f"{'ok  ' if diff < 1e-5 else 'FAIL'} {what} max |d| = {diff:.2e}")

    def fresh():
        graph = tf.Graph()
        sess = tf.Session(graph=graph)
        K.backend.set_session(sess)
        return graph.as_default(), sess

    ctx, sess = fresh()
    with ctx, sess:
        m = K.models.load_model(os.path.join(out, "seq.h5"))
        report("load_model(seq.h5).predict", [m.predict(cases.XS)], [expected["seq_pred"]])
        report("two more Adam steps", _steps(m, cases.XS, cases.YS), expected["seq_steps"])
    ctx, sess = fresh()
    with ctx, sess:
        m = cases.func_model(K)
        m.load_weights(os.path.join(out, "func_weights.h5"))
        got = m.predict([cases.XA, cases.XB])
        report("load_weights(func_weights.h5).predict", got, expected["func_pred"])
        m = K.models.load_model(os.path.join(out, "multi.h5"))
        got = _steps(m, [cases.XA, cases.XB], [cases.YA, cases.YB])
        report("load_model(multi.h5): two more RMSprop steps", got, expected["multi_steps"])
    ctx, sess = fresh()
    with ctx, sess:
        m = K.models.load_model(os.path.join(out, "nested.h5"))
        report("load_model(nested.h5): two more SGD steps", _steps(m, X1, Y1),
               expected["nested_steps"])  # fmt: skip
    ctx, sess = fresh()
    with ctx, sess:
        m = K.models.load_model(os.path.join(out, "rnn.h5"))
        report("load_model(rnn.h5).predict", [m.predict(XR)], [expected["rnn_pred"]])


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
