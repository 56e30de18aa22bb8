"""A GraphDef TF 2.21 wrote (tests/fixtures/s25_rawops_graph.pbtxt: tf.signal.rfft/irfft,
tf.math.bessel_i0, ClipByValue, NthElement, tf.image.rgb_to_hsv and the gradient TF built
through RFFT and BesselI0) imports here and runs to TF's values, recorded from TF 2.21."""

import pathlib

import numpy as np
from google.protobuf import text_format

import asyncflow as tf
from asyncflow.protos import graph_pb2

FIXTURE = pathlib.Path(__file__).parent.parent / "fixtures" / "s25_rawops_graph.pbtxt"
FEED = np.array([[0.5, -1.5, 2.0, 0.25], [1.0, 0.0, -0.5, 3.0]], np.float32)
WANT = {
    "mag:0": [[1.25, 2.304886, 3.75], [3.5, 3.354102, 2.5]],
    "back:0": [[0.5, -1.5, 2.0, 0.25], [1.0, 0.0, -0.5, 3.0]],
    "bessel_i0/BesselI0:0": [
        [1.063484, 1.646723, 2.279585, 1.015686],
        [1.266066, 1.0, 1.063484, 4.880793],
    ],
    "clip:0": [[0.5, -1.0, 1.0, 0.25], [1.0, 0.0, -0.5, 1.0]],
    "nth:0": [0.25, 0.0],
    "RGBToHSV:0": [[0.771681, 0.792886, 0.880797], [0.057734, 0.48357, 0.731059]],
    "gradients/AddN:0": [
        [1.607103, -1.740923, 4.241428, 0.885236],
        [1.012373, 1.105573, -0.705108, 6.847798],
    ],
}


def test_tf_graph_def_with_new_ops_imports_and_runs():
    gd = text_format.Parse(FIXTURE.read_text(), graph_pb2.GraphDef())
    assert {"RFFT", "IRFFT", "BesselI0", "BesselI1", "ClipByValue", "NthElement", "RGBToHSV"} <= {
        n.op for n in gd.node
    }
    with tf.Graph().as_default():
        tensors = tf.import_graph_def(gd, return_elements=list(WANT), name="")
        with tf.Session() as sess:
            values = sess.run(tensors, {"x:0": FEED})
    for (name, want), got in zip(WANT.items(), values):
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=name)
