"""Check that asyncflow loads the SavedModels TF 2.x and Keras 3 write, to TF's numbers.

Two halves, two interpreters (TF is never a dependency of asyncflow or its tests):
  /work/tfvenv/bin/python tools/check_tf2_saved_models.py write DIR   # TF 2.21 + Keras 3 export
  .venv/bin/python tools/check_tf2_saved_models.py check DIR          # asyncflow loads and runs
`write` exports a zoo of Keras 3 models (`model.export`: convolutions 1-D to 3-D,
separable, depthwise and transposed; pooling, padding, cropping, upsampling; batch,
layer, group and unit normalization; embeddings; multi-head attention; merge layers and
activations; image preprocessing layers (rescaling, resizing, cropping, a random flip
that inference skips); a mix of keras.ops; text and lookup preprocessing
(TextVectorization as ids and as tf-idf of bigrams, StringLookup, IntegerLookup); LSTM,
GRU and a bidirectional LSTM, which TF 2.x writes as While loops over TensorLists) and
what TF computes running each exported SavedModel on one input (expected.json).
`check` loads each with `af.saved_model.loader.load` (TF1's API, as a TF1 serving stack
does), runs the serving signature and prints the largest difference from TF's outputs.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np


def _zoo(L):
    def conv(x):
        y = L.Conv2D(4, 3, strides=2, activation="gelu")(x)
        y = L.SeparableConv2D(4, 3, padding="same")(L.DepthwiseConv2D(3)(y))
        return L.Dense(3)(L.GlobalAveragePooling2D()(L.BatchNormalization()(y)))

    def conv_t(x):
        y = L.Conv2DTranspose(3, 3, strides=2, padding="same")(L.AveragePooling2D(2)(x))
        return L.Cropping2D(1)(L.ZeroPadding2D(2)(L.UpSampling2D(2)(y)))

    def misc(x):
        a = L.Multiply()([L.Dense(3, activation="elu")(x), L.Dense(3, activation="selu")(x)])
        b = L.Reshape((6,))(L.Permute((2, 1))(L.Reshape((3, 2))(x)))
        return L.Concatenate()([a, b, L.LeakyReLU(0.2)(x), L.PReLU()(x)])

    return {
        "conv2d": ((16, 16, 3), conv),
        "conv2d_transpose": ((8, 8, 2), conv_t),
        "conv1d": ((20, 4), lambda x: L.GlobalMaxPooling1D()(
            L.MaxPooling1D(2)(L.Conv1D(5, 3, dilation_rate=2, activation="swish")(x)))),
        "conv3d": ((6, 6, 6, 1), lambda x: L.GlobalAveragePooling3D()(
            L.MaxPooling3D(2)(L.Conv3D(2, 3)(x)))),
        "embedding": ((7,), lambda x: L.Dense(2, activation="softmax")(
            L.Flatten()(L.LayerNormalization()(L.Embedding(50, 6)(x))))),
        "attention": ((5, 8), lambda x: L.Add()([x, L.MultiHeadAttention(2, 4)(x, x)])),
        "merge_activations": ((6,), misc),
        "preprocess_image": ((8, 8, 3), lambda x: L.UnitNormalization()(L.Flatten()(
            L.GroupNormalization(2)(L.Conv2D(4, 3, padding="same")(L.RandomFlip()(
                L.CenterCrop(4, 4)(L.Resizing(6, 6)(L.Rescaling(1 / 255.0)(x))))))))),
        "ops": ((3,), lambda x: keras_ops_mix(L, x)),
        "lstm": ((5, 3), lambda x: L.Dense(2)(L.LSTM(4)(x))),
        "gru": ((5, 3), lambda x: L.GRU(4, return_sequences=True)(x)),
        "bidirectional_lstm": ((4, 3), lambda x: L.Bidirectional(L.LSTM(3))(x)),
    }  # fmt: skip


def keras_ops_mix(L, x):
    import keras

    ops = keras.ops
    y = L.Dense(3)(x)
    y = ops.softmax(y) + ops.erf(y) + ops.log1p(ops.abs(y)) + ops.cumsum(y, axis=1)
    return ops.top_k(y, 2)[0] + ops.cast(ops.argmax(y, axis=1)[:, None], "float32")


def _text_models(keras):
    """Keras' text and lookup preprocessing (string inputs; lookup tables, ragged ops)."""
    L = keras.layers  # noqa: N806 - Keras' own idiom
    corpus = ["the cat sat", "the dog ran far", "a cat ran"]
    ints = L.TextVectorization(max_tokens=20, output_sequence_length=5)
    ints.adapt(corpus)
    tfidf = L.TextVectorization(max_tokens=10, output_mode="tf_idf", ngrams=2)
    tfidf.adapt(corpus)
    lookup = L.StringLookup(vocabulary=["a", "b", "c"], output_mode="one_hot")
    out = []
    for name, layer, shape, x in (
        ("text_vectorization", ints, (), [b"The cat ran!", b"unknown words x y z"]),
        ("text_tf_idf", tfidf, (), [b"the cat ran far", b"a a a"]),
        ("string_lookup", lookup, (2,), [[b"a", b"z"], [b"c", b"b"]]),
    ):
        inp = keras.Input(shape, dtype="string")
        out.append((name, keras.Model(inp, layer(inp)), np.array(x, dtype=object)))
    inp = keras.Input((3,), dtype="int64")
    ilookup = L.IntegerLookup(vocabulary=[10, 20, 30])
    out.append(("integer_lookup", keras.Model(inp, ilookup(inp)),
                np.array([[10, 5, 30], [20, 20, 1]], np.int64)))  # fmt: skip
    return out


def write(out: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    rng = np.random.RandomState(1)
    expected = {}
    models = []
    for name, (shape, build) in _zoo(keras.layers).items():
        inp = keras.Input(shape)
        if name == "embedding":
            x = rng.randint(0, 50, (2, *shape)).astype(np.float32)
        else:
            x = rng.rand(2, *shape).astype(np.float32)
        models.append((name, keras.Model(inp, build(inp)), x))
    models += _text_models(keras)
    for name, model, x in models:
        path = os.path.join(out, name)
        model.export(path)
        # TF's own run of the SavedModel is the reference (a Keras model called eagerly
        # can differ from the graph it exported: `[:, None]` on a symbolic tensor).
        fn = tf.saved_model.load(path).signatures["serving_default"]
        (arg,) = fn.structured_input_signature[1]
        (y,) = fn(**{arg: tf.constant(x)}).values()
        text = x.dtype == object
        expected[name] = {
            "x": [[v.decode() for v in row] for row in x.reshape(len(x), -1)] if text
            else x.tolist(),
            "shape": list(x.shape), "text": bool(text), "dtype": str(x.dtype),
            "y": y.numpy().tolist(),
        }  # fmt: skip
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


def check(out: str) -> int:
    import asyncflow as af

    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)
    bad = 0
    for name, e in expected.items():
        try:
            with af.Graph().as_default() as g, af.Session(graph=g) as sess:
                meta = af.saved_model.loader.load(sess, ["serve"], os.path.join(out, name))
                sig = meta.signature_def["serving_default"]
                (arg,) = sig.inputs.values()
                (res,) = sig.outputs.values()
                if e.get("text"):
                    x = np.array([[v.encode() for v in row] for row in e["x"]], dtype=object)
                    x = x.reshape(e["shape"])
                else:
                    x = np.asarray(e["x"], e.get("dtype", "float32"))
                y = sess.run(res.name, {arg.name: x})
            diff = float(np.max(np.abs(np.asarray(y) - np.asarray(e["y"]))))
            ok = diff <= 1e-4
            print(f"{'ok  ' if ok else 'DIFF'} {name:20s} max |dy| = {diff:.2e}")
        except Exception as ex:  # noqa: BLE001 - a report line per model
            ok = False
            print(f"FAIL {name:20s} {type(ex).__name__}: {str(ex).splitlines()[0][:120]}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    sys.exit(write(out) if mode == "write" else check(out))
