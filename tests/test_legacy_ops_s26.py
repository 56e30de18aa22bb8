"""TF 1.x op types old GraphDefs hold (ops/legacy_nn_ops.py ...), against TF 2.21.

The cases and TF's results are in tests/fixtures/legacy_s26b/ (recorded from TF 2.21 by
building each op with tf.raw_ops in a TF1 graph and running it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import asyncflow as tf
from tests import legacy_s26_cases as cases

_NN = cases.load("nn_array_cases.json")


@pytest.mark.parametrize("case", _NN, ids=[c["name"] for c in _NN])
def test_nn_array_ops_match_tf(case):
    half = any(
        not isinstance(a, list) and a["dtype"] in ("float16", "bfloat16")
        for a in case["args"].values()
    )
    cases.run_case(case, rtol=1e-2 if half else 1e-5, atol=1e-2 if half else 1e-5)


_TRAIN = cases.load("training_cases.json")


@pytest.mark.parametrize("case", _TRAIN, ids=[c["name"] for c in _TRAIN])
def test_optimizer_updates_match_tf(case):
    """Each op run `steps` times on fresh variables (ref or resource, as TF's case)."""
    with tf.Graph().as_default():
        vs = {
            k: tf.Variable(np.array(v, np.float32), use_resource=case["resource"])
            for k, v in case["refs"].items()
        }
        args = {k: (v.handle if case["resource"] else v) for k, v in vs.items()}
        args.update({k: tf.constant(np.array(v, d)) for k, (v, d) in case["args"].items()})
        op = getattr(tf.raw_ops, case["op"])(**args, **case["attrs"])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            if "error" in case["expect"]:
                cls, msg = case["expect"]["error"]
                with pytest.raises(getattr(tf.errors, cls)) as info:
                    for _ in range(case["steps"]):
                        sess.run(op)
                assert info.value.message.split("\n\t [[")[0] == msg
                return
            for _ in range(case["steps"]):
                sess.run(op)
            for k, want in case["expect"]["refs"].items():
                np.testing.assert_allclose(sess.run(vs[k]), want, rtol=1e-6, atol=1e-7, err_msg=k)


# -- random op types (values recorded from TF 2.21) --------------------------------------------


def test_rng_skip_moves_the_counter_as_tf():
    with tf.Graph().as_default():
        v = tf.Variable(np.array([5, 0, 7], np.int64), use_resource=True)

        def skip(alg):
            return tf.raw_ops.RngSkip(
                resource=v.handle,
                algorithm=tf.constant(alg, tf.int64),
                delta=tf.constant(3, tf.int64),
            )

        with tf.Session() as sess:
            sess.run(v.initializer)
            sess.run(skip(1))
            assert sess.run(v).tolist() == [773, 0, 7]
            with pytest.raises(
                tf.errors.InvalidArgumentError, match="Unsupported algorithm id: 5"
            ):
                sess.run(skip(5))
            sess.run(skip(3))  # (auto-select: Philox)
            assert sess.run(v).tolist() == [1541, 0, 7]


def test_stateless_shuffle_matches_tf():
    with tf.Graph().as_default():
        x = tf.reshape(tf.range(10), [5, 2])
        key, counter = tf.constant([12345], tf.uint64), tf.constant([7, 9], tf.uint64)
        a = tf.raw_ops.StatelessShuffle(value=x, key=key, counter=counter, alg=1)
        b = tf.raw_ops.StatelessShuffle(
            value=tf.range(20),
            key=tf.constant([2**63 + 5], tf.uint64),
            counter=tf.constant([0, 0], tf.uint64),
            alg=1,
        )
        assert a.shape.as_list() == [5, 2]
        with tf.Session() as sess:
            got_a, got_b = sess.run([a, b])
    assert got_a.tolist() == [[4, 5], [8, 9], [2, 3], [0, 1], [6, 7]]
    assert got_b.tolist() == [17, 4, 13, 18, 10, 5, 7, 19, 15, 14, 9, 12, 0, 2, 8, 1, 6, 16, 11, 3]


def test_stateless_sample_distorted_bounding_box_matches_tf():
    box = tf.raw_ops.StatelessSampleDistortedBoundingBox
    with tf.Graph().as_default():
        outs = [
            box(image_size=[40, 60, 3], bounding_boxes=[[[0.1, 0.2, 0.5, 0.9]]],
                min_object_covered=0.3, seed=[3, 4]),
            box(image_size=tf.constant([100, 80, 3], tf.int64),
                bounding_boxes=tf.zeros([1, 0, 4]), min_object_covered=0.1,
                seed=tf.constant([9, 1], tf.int64), use_image_if_no_bounding_boxes=True,
                area_range=[0.2, 0.6]),
        ] + [
            box(image_size=[30, 50, 1], bounding_boxes=[[[0.0, 0.0, 1.0, 1.0]]],
                min_object_covered=0.1, seed=[i, 2 * i])
            for i in range(5)
        ]  # fmt: skip
        with tf.Session() as sess:
            got = sess.run([list(o) for o in outs])
    want = [  # (begin, size) of each
        ([0, 18, 0], [40, 36, -1]),
        ([10, 4, 0], [43, 55, -1]),
        ([2, 3, 0], [22, 19, -1]),
        ([0, 14, 0], [12, 15, -1]),
        ([3, 9, 0], [18, 17, -1]),
        ([4, 10, 0], [25, 31, -1]),
        ([5, 2, 0], [24, 30, -1]),
    ]
    assert [(b.tolist(), s.tolist()) for b, s, _ in got] == want
    np.testing.assert_allclose(got[1][2], [[[0.1, 0.05, 0.53, 0.7375]]], rtol=1e-6)
    assert got[1][0].dtype == np.int64


def test_non_deterministic_ints():
    with tf.Graph().as_default():
        a = tf.raw_ops.NonDeterministicInts(shape=[2, 3])
        b = tf.raw_ops.NonDeterministicInts(shape=tf.constant([4], tf.int32), dtype=tf.int32)
        c = tf.raw_ops.NonDeterministicInts(shape=[2], dtype=tf.float32)
        assert (a.dtype, a.shape.as_list(), b.dtype, b.shape.as_list()) == (
            tf.int64, [2, 3], tf.int32, [4])  # fmt: skip
        with tf.Session() as sess:
            va, vb = sess.run([a, b])
            assert (va.shape, va.dtype, vb.shape, vb.dtype) == ((2, 3), np.int64, (4,), np.int32)
            assert len(set(va.reshape(-1).tolist())) == 6  # (64 random bits each)
            with pytest.raises(tf.errors.InvalidArgumentError) as info:
                sess.run(c)
    assert info.value.message.startswith(
        "No OpKernel was registered to support Op 'NonDeterministicInts' used by "
        "{{node NonDeterministicInts_2}} with these attrs: [shape_dtype=DT_INT64, "
        "dtype=DT_FLOAT]\nRegistered devices: [CPU]\nRegistered kernels:\n"
        "  device='CPU'; dtype in [DT_UINT64]\n"
    )


_RNN = cases.load("rnn_cases.json")


@pytest.mark.parametrize("case", _RNN, ids=[c["name"] for c in _RNN])
def test_rnn_block_ops_match_tf(case):
    half = case["args"]["x"]["dtype"] == "float16"
    cases.run_case(case, rtol=1e-2 if half else 1e-5, atol=1e-2 if half else 2e-6)


def test_no_gradient_where_tf_21_has_none():
    """tf.gradients through these raises LookupError in TF 2.21 (its registry has no
    entry: tf.contrib, which differentiated the cells, is gone)."""
    z = np.zeros((2, 4), np.float32)
    with tf.Graph().as_default():
        x = tf.constant(np.zeros((2, 3), np.float32))
        vec = tf.constant(np.zeros(4, np.float32))
        w = tf.constant(np.zeros((7, 16), np.float32))
        cell = tf.raw_ops.LSTMBlockCell(
            x=x, cs_prev=z, h_prev=z, w=w, wci=vec, wcf=vec, wco=vec, b=tf.zeros([16])
        )
        seg = tf.raw_ops.SparseSegmentSumGrad(
            grad=tf.ones([2, 2]), indices=[0, 1], segment_ids=[0, 1], output_dim0=3
        )
        for y, xs in ((cell.h, x), (seg, seg.op.inputs[0])):
            with pytest.raises(LookupError, match="No gradient defined for operation"):
                tf.gradients(y, xs)


_IMAGE = cases.load("image_cases.json")


@pytest.mark.parametrize("case", _IMAGE, ids=[c["name"] for c in _IMAGE])
def test_image_and_pool_ops_match_tf(case):
    cases.run_case(case, rtol=1e-5, atol=2e-5)


def test_max_pool_grad_grad_with_argmax_has_no_cpu_kernel_as_tf():
    with tf.Graph().as_default():
        x = tf.zeros([1, 4, 4, 1])
        out = tf.raw_ops.MaxPoolGradGradWithArgmax(
            input=x,
            grad=x,
            argmax=tf.zeros([1, 2, 2, 1], tf.int64),
            ksize=[1, 2, 2, 1],
            strides=[1, 2, 2, 1],
            padding="VALID",
        )
        assert out.shape.as_list() == [1, 2, 2, 1]
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(out)
    # (TF lists the attrs in its hash map's order, which varies run to run)
    assert info.value.message.startswith(
        "No OpKernel was registered to support Op 'MaxPoolGradGradWithArgmax' used by "
        "{{node MaxPoolGradGradWithArgmax}} with these attrs: ["
    )
    assert info.value.message.split("\n\t [[")[0].endswith(
        "Registered devices: [CPU]\nRegistered kernels:\n"
        "  device='GPU'; T in [DT_DOUBLE]; Targmax in [DT_INT64]\n"
        "  device='GPU'; T in [DT_FLOAT]; Targmax in [DT_INT64]\n"
        "  device='GPU'; T in [DT_BFLOAT16]; Targmax in [DT_INT64]\n"
        "  device='GPU'; T in [DT_HALF]; Targmax in [DT_INT64]"
    )


def test_tf_graph_def_with_legacy_ops_imports_and_runs():
    """A GraphDef TF 2.21 wrote (fixtures/legacy_s26b/legacy_graph.pbtxt: an inference
    FusedBatchNorm, ImageProjectiveTransformV3, BlockLSTM with peepholes, GRUBlockCell,
    SparseMatMul, FusedBatchNormV2, StatelessSampleDistortedBoundingBox, and the gradient
    TF built through them: BlockLSTMGrad, FusedBatchNormGrad/V2, the transform's inverse)
    imports here and runs to TF's values."""
    from google.protobuf import text_format

    from asyncflow.protos import graph_pb2

    text = (cases.FIXTURES / "legacy_graph.pbtxt").read_text()
    gd = text_format.Parse(text, graph_pb2.GraphDef())
    record = json.loads((cases.FIXTURES / "legacy_graph_values.json").read_text())
    assert {"BlockLSTMGrad", "FusedBatchNormGrad", "SparseMatMul", "GRUBlockCell"} <= {
        n.op for n in gd.node
    }
    with tf.Graph().as_default():
        fetch = list(record["fetch"])
        tensors = tf.import_graph_def(gd, return_elements=fetch, name="")
        with tf.Session() as sess:
            values = sess.run(tensors, {"x:0": np.array(record["feed"], np.float32)})
    for name, got in zip(fetch, values):
        np.testing.assert_allclose(got, record["fetch"][name], rtol=1e-5, atol=1e-5, err_msg=name)


_AUDIO = cases.load("audio_cases.json")


@pytest.mark.parametrize("case", _AUDIO, ids=[c["name"] for c in _AUDIO])
def test_audio_feature_ops_match_tf(case):
    cases.run_case(case, rtol=2e-5, atol=2e-5)


def test_audio_summary_v1_from_an_old_graph_def_writes_tfs_summary():
    """AudioSummary (removed from GraphDef version 15 on) imports from a version-14
    GraphDef and writes TF 2.21's Summary bytes; built now it raises TF's error."""
    from google.protobuf import text_format

    from asyncflow.protos import graph_pb2

    text = (cases.FIXTURES / "audio_summary_v1.pbtxt").read_text()
    gd = text_format.Parse(text, graph_pb2.GraphDef())
    want = json.loads((cases.FIXTURES / "audio_summary_v1.json").read_text())["summaries"]
    with tf.Graph().as_default():
        tensors = tf.import_graph_def(gd, return_elements=["audio:0", "audio1:0"], name="")
        with tf.Session() as sess:
            got = sess.run(tensors)
    assert [g.hex() for g in got] == want
    with tf.Graph().as_default():
        with pytest.raises(
            NotImplementedError, match="removed in version 15. Use AudioSummaryV2.."
        ):
            tf.raw_ops.AudioSummary(tag="a", tensor=tf.zeros([1, 4]), sample_rate=8000.0)


_QDQ = cases.load("quantize_dequantize_cases.json")


@pytest.mark.parametrize("case", _QDQ, ids=[c["name"] for c in _QDQ])
def test_quantize_and_dequantize_spellings_match_tf(case):
    cases.run_case(case, rtol=1e-6, atol=1e-7)


def test_quantization_builders_and_the_v1_op_match_tf():
    """tf.quantization.quantize_and_dequantize(_v2) (ops V2 / V4, names, values and
    gradients) and a version-21 GraphDef's QuantizeAndDequantize; values from TF 2.21."""
    from google.protobuf import text_format

    from asyncflow.protos import graph_pb2

    qdq = tf.quantization
    with tf.Graph().as_default():
        x = tf.constant(np.array([[-1.2, 0.3, 0.77], [2.5, -0.01, 0.5]], np.float32))
        a = qdq.quantize_and_dequantize(x, -1.0, 1.0, range_given=True)
        b = qdq.quantize_and_dequantize_v2(
            x, -2.0, 2.0, num_bits=4, range_given=True, round_mode="HALF_UP"
        )
        c = qdq.quantize_and_dequantize_v2(x, 0.0, 0.0, narrow_range=True, name="qq")
        with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 0"):
            qdq.quantize_and_dequantize_v2(x, 0.0, 0.0, axis=-1)  # (TF's: axis 1 then)
        assert [(t.name, t.op.type) for t in (a, b, c)] == [
            ("QuantizeAndDequantizeV2:0", "QuantizeAndDequantizeV2"),
            ("QuantizeAndDequantizeV4:0", "QuantizeAndDequantizeV4"),
            ("qq:0", "QuantizeAndDequantizeV4"),
        ]
        assert [i.name for i in c.op.inputs] == ["Const:0", "qq/input_min:0", "qq/input_max:0"]
        g = tf.gradients(a + b, x)
        with tf.Session() as sess:
            got = sess.run([a, b, c] + g)
        with pytest.raises(NotImplementedError, match="removed in version 22. Replaced by Q"):
            tf.raw_ops.QuantizeAndDequantize(input=x)
    want = [
        [[-1.007874, 0.2992126, 0.77165353], [1.0, -0.007874016, 0.503937]],
        [[-1.1428572, 0.2857143, 0.8571429], [2.0, 0.0, 0.5714286]],
        [[-1.2007874, 0.2952756, 0.7677165], [2.5, -0.01968504, 0.49212599]],
        [[2.0, 2.0, 2.0], [1.0, 2.0, 2.0]],
    ]
    for k, (v, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(v, w, rtol=1e-6, err_msg=str(k))
    text = (cases.FIXTURES / "qdq_v1.pbtxt").read_text()
    gd = text_format.Parse(text, graph_pb2.GraphDef())
    with tf.Graph().as_default():
        out = tf.import_graph_def(gd, return_elements=["q:0", "q2:0"], name="")
        with tf.Session() as sess:
            q, q2 = sess.run(out)
    np.testing.assert_allclose(q, [[-1.0, 0.5, 1.0], [1.5, -0.0, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(
        q2, [[-1.1960784, 0.30392158, 0.7745098], [2.5, -0.009803922, 0.5]], rtol=1e-6
    )


_SEQ = cases.load("sequence_example_cases.json")


@pytest.mark.parametrize("case", _SEQ, ids=[c["name"] for c in _SEQ])
def test_old_sequence_example_parsers_match_tf(case):
    cases.run_case(case)


def test_parameterized_truncated_normal_matches_tfs_seeded_draws():
    """The stateful op's seeded numbers (first 12 of each, then a second run of the
    first op: its generator moved on by what the first run reserved), from TF 2.21."""
    p = tf.raw_ops.ParameterizedTruncatedNormal
    inf = np.inf
    with tf.Graph().as_default():
        outs = [
            p(shape=[3, 4], means=0.5, stdevs=1.5, minvals=-1.0, maxvals=2.0, seed=7, seed2=3),
            p(shape=[2, 5], means=[0.0, 3.0], stdevs=[1.0, 0.5], minvals=[-0.1, -10.0],
              maxvals=[0.1, 10.0], seed=1, seed2=2),
            p(shape=[2, 3], means=tf.constant([0.0], tf.float64),
              stdevs=tf.constant(1.0, tf.float64), minvals=tf.constant([2.5, 5.0], tf.float64),
              maxvals=tf.constant(inf, tf.float64), seed=4, seed2=0),
            p(shape=[230], means=1.0, stdevs=2.0, minvals=-inf, maxvals=-3.0, seed=9, seed2=9),
            p(shape=[1, 2, 3], means=[0.0], stdevs=[1.0], minvals=[0.0], maxvals=[1.0], seed=5,
              seed2=5),
        ]  # fmt: skip
        bad = p(shape=[3, 4], means=0.0, stdevs=-1.0, minvals=-1.0, maxvals=2.0)
        with tf.Session() as sess:
            got = [sess.run(o).reshape(-1)[:12] for o in outs]
            again = sess.run(outs[0]).reshape(-1)[:6]
            with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid parameters"):
                sess.run(bad)
    want = [
        [0.20326, 0.13052, -0.07212, -0.73577, 1.76636, -0.71692, 0.48015, -0.11855, 1.50931,
         0.37705, 1.26646, 0.0712],
        [-0.01872, 0.07152, -0.08892, -0.08283, 0.07382, 3.25257, 2.56119, 2.87031, 2.82523,
         2.26164],
        [2.79246, 2.63489, 3.4638, 5.19238, 5.09975, 5.02619],
        [-3.26807, -3.40142, -4.53633, -4.75753, -3.83602, -3.60503, -3.16501, -3.79582,
         -3.59524, -5.39639, -3.73274, -3.4878],
        [0.15475, 0.84222, 0.46013, 0.30274, 0.96881, 0.86724],
    ]  # fmt: skip
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, atol=1e-5, err_msg=str(k))
    assert got[2].dtype == np.float64
    np.testing.assert_allclose(
        again, [-0.7507, 1.39835, -0.69582, -0.60173, 0.93532, 0.05762], atol=1e-5
    )


_QUANT = cases.load("quantized_cases.json")
_PLAIN = {"quint8": np.uint8, "qint8": np.int8, "qint32": np.int32}


@pytest.mark.parametrize("case", _QUANT, ids=[c["name"] for c in _QUANT])
def test_eight_bit_graph_ops_match_tf(case):
    """Quantized inputs are given (and outputs read) as their codes through Bitcast, as
    the recording did in TF 2.21."""
    with tf.Graph().as_default():
        args = {}
        for k, a in case["args"].items():
            plain = _PLAIN.get(a["dtype"], a["dtype"])
            t = tf.constant(np.array(a["value"], plain).reshape(a["shape"]))
            args[k] = tf.bitcast(t, tf.as_dtype(a["dtype"])) if a["dtype"] in _PLAIN else t
        attrs = {k: cases._attr(v) for k, v in case["attrs"].items()}
        res = list(getattr(tf.raw_ops, case["op"])(**args, **attrs))
        fetch = [
            tf.bitcast(r, tf.as_dtype(_PLAIN[r.dtype.name])) if r.dtype.name in _PLAIN else r
            for r in res
        ]
        with tf.Session() as sess:
            if "error" in case["expect"]:
                cls, msg = case["expect"]["error"]
                with pytest.raises(getattr(tf.errors, cls)) as info:
                    sess.run(fetch)
                assert info.value.message.split("\n\t [[")[0] == msg
                return
            values = sess.run(fetch)
    for k, (v, r, want) in enumerate(zip(values, res, case["expect"]["outputs"])):
        assert r.dtype.name == want["dtype"], k
        np.testing.assert_array_equal(
            np.asarray(v).reshape(-1), np.array(want["value"], np.asarray(v).dtype), str(k)
        )
        assert list(np.shape(v)) == want["shape"], k


def test_clustering_kernels_match_tf():
    """NearestNeighbors (ties by the lower index) and KMC2ChainInitialization's seeded
    chains, recorded from TF 2.21; BatchCholeskyGrad is refused as TF refuses it."""
    r = np.random.RandomState(2)
    pts = np.round(r.randn(6, 3), 2).astype(np.float32)
    ctr = np.round(r.randn(4, 3), 2).astype(np.float32)
    ctr[3] = ctr[1]
    dist = np.abs(np.round(r.randn(40), 3)).astype(np.float32)
    with tf.Graph().as_default():
        nn = tf.raw_ops.NearestNeighbors(points=pts, centers=ctr, k=3)
        every = tf.raw_ops.NearestNeighbors(points=pts, centers=ctr, k=10)
        seeds = (0, 1, 12345, -7, 2**40 + 3)
        kmc = [tf.raw_ops.KMC2ChainInitialization(distances=dist, seed=s) for s in seeds]
        bad = tf.raw_ops.NearestNeighbors(points=pts, centers=ctr[:, :2], k=1)
        with tf.Session() as sess:
            idx, d = sess.run(list(nn))
            assert sess.run(every)[0].shape == (6, 4)
            assert sess.run(kmc) == [34, 39, 39, 37, 39]
            with pytest.raises(tf.errors.InvalidArgumentError) as info:
                sess.run(bad)
        with pytest.raises(NotImplementedError, match="removed in version 13. Use CholeskyGrad"):
            tf.raw_ops.BatchCholeskyGrad(l=[[1.0]], grad=[[1.0]])
    assert info.value.message.startswith("Expected point_dimensions == center_dimensions: 3 vs 2.")
    assert idx.tolist() == [[1, 3, 0], [2, 1, 3], [2, 1, 3], [2, 0, 1], [2, 0, 1], [2, 0, 1]]
    np.testing.assert_allclose(
        d,
        [[1.4925, 1.4925, 1.7014], [6.3629, 7.465, 7.465], [1.9021, 2.7206, 2.7206],
         [9.5339, 10.3661, 11.405], [2.3112, 3.9174, 4.2853], [3.4284, 4.267, 4.9809]],
        rtol=1e-6,
    )  # fmt: skip


def test_isotonic_regression_matches_tf():
    """Values, segments (equal neighbours stay apart), output types and the segment-mean
    gradient, recorded from TF 2.21; an unregistered type pair is TF's error."""
    with tf.Graph().as_default():
        x = tf.constant([[1.0, 3.0, 2.0, 4.0, 0.5, 0.7, 0.1], [5.0, 4.0, 4.0, 6.0, 1.0, 1.0, 2.0]])
        o = tf.raw_ops.IsotonicRegression(input=x)
        o2 = tf.raw_ops.IsotonicRegression(
            input=tf.constant([[3, 1, 2], [0, 0, 5]]), output_dtype=tf.float64
        )
        ties = tf.raw_ops.IsotonicRegression(input=[[2.0, 2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 3.0]])
        bad = tf.raw_ops.IsotonicRegression(input=tf.constant([[1.0]], tf.float64))
        gy = [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.5, 1.5, -1.0, 2.0, 1.0, 0.0, 3.0]]
        (g,) = tf.gradients(o.output, x, grad_ys=tf.constant(gy))
        assert o2.output.dtype == tf.float64
        with tf.Session() as sess:
            out, seg, out2, seg2, tv, ts, gv = sess.run(
                [o.output, o.segments, o2.output, o2.segments, ties.output, ties.segments, g]
            )
            with pytest.raises(tf.errors.InvalidArgumentError, match="No OpKernel was regi"):
                sess.run(bad.output)
    third, four = 1 / 3, 14 / 3
    row2 = [5.0, four, four, four] + [4 * third] * 3
    np.testing.assert_allclose(out, [[2.5] * 4 + [0.6, 0.6, 0.1], row2], rtol=1e-7)
    assert seg.tolist() == [[0, 0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 2, 2, 2]]
    np.testing.assert_allclose(out2, [[3.0, 1.5, 1.5], [5 * third] * 3], rtol=1e-15)
    assert seg2.tolist() == [[0, 1, 1], [0, 0, 0]]
    assert tv.tolist() == [[2.0, 2.0, 1.0, 1.0], [1.5] * 4]
    assert ts.tolist() == [[0, 1, 2, 3], [0, 0, 0, 0]]
    grad2 = [0.5] + [2.5 * third] * 3 + [4 * third] * 3
    np.testing.assert_allclose(gv, [[2.5] * 4 + [5.5, 5.5, 7.0], grad2], rtol=1e-6)


def test_ctc_loss_v2_imports_has_tfs_gradient_and_no_cpu_kernel():
    """TF 2.21 runs CTCLossV2 on GPUs only: built and differentiated as there (the
    gradient is CTCLoss' rule), on a CPU it raises TF's "No OpKernel" error."""
    with tf.Graph().as_default():
        x = tf.zeros([3, 2, 4])
        o = tf.raw_ops.CTCLossV2(
            inputs=x,
            labels_indices=tf.constant([[0, 0], [1, 0]], tf.int64),
            labels_values=[1, 2],
            sequence_length=[3, 3],
        )
        assert (o.loss.shape.as_list(), o.gradient.shape.as_list()) == ([2], [3, 2, 4])
        (g,) = tf.gradients(o.loss, x)
        assert g.op.type == "Mul"
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(o.loss)
    assert info.value.message.startswith(
        "No OpKernel was registered to support Op 'CTCLossV2' used by {{node CTCLossV2}} with "
        "these attrs: ["
    )
    assert "Registered devices: [CPU]\nRegistered kernels:\n  device='GPU'\n" in info.value.message


def test_per_channel_requantization_matches_tf():
    """RequantizationRangePerChannel / RequantizePerChannel on an NHWC qint32 tensor,
    codes and ranges recorded from TF 2.21."""
    x = np.array(
        [[[[-50260118, 35325592, 88681721], [117892739, -92750920, 252666824]],
          [[-221931264, 29254421, -191353859], [-1881453, -176982326, -187913365]]]],
        np.int32,
    )  # fmt: skip
    lo = np.array([-1.0, -5.0, -0.2], np.float32)
    hi = np.array([2.0, 3.0, 0.5], np.float32)
    with tf.Graph().as_default():
        xq = tf.bitcast(tf.constant(x), tf.qint32)
        rr = tf.raw_ops.RequantizationRangePerChannel(
            input=xq, input_min=lo, input_max=hi, clip_value_max=6.0
        )
        clipped = tf.raw_ops.RequantizationRangePerChannel(
            input=xq, input_min=lo, input_max=hi, clip_value_max=0.1
        )
        kw = {"input": xq, "input_min": lo, "input_max": hi}
        rq = tf.raw_ops.RequantizePerChannel(
            **kw, requested_output_min=-0.4, requested_output_max=0.6
        )
        rq8 = tf.raw_ops.RequantizePerChannel(
            **kw, requested_output_min=-0.4, requested_output_max=0.6, out_type=tf.qint8
        )
        with tf.Session() as sess:
            got = sess.run(
                [*rr, *clipped, tf.bitcast(rq.output, tf.uint8), rq.output_min, rq.output_max,
                 tf.bitcast(rq8.output, tf.int8)]
            )  # fmt: skip
    np.testing.assert_allclose(got[:4], [-0.41206908, 0.41206908, -0.1, 0.1], rtol=1e-7)
    assert got[4].tolist() == [[[[0, 35, 9], [47, 0, 25]], [[0, 29, 0], [0, 0, 0]]]]
    np.testing.assert_allclose(got[5:7], [-0.4, 0.6], rtol=1e-7)
    assert got[7].tolist() == [[[[-10, 17, 4], [23, -46, 12]], [[-44, 14, -9], [0, -87, -9]]]]
