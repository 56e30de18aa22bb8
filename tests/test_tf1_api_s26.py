"""TF1 API pieces matched to TF 2.21's tf.compat.v1 (recorded there; graph mode):
tf.autograph's non-converting parts, tf.io.gfile.join and URL schemes,
tf.config.run_functions_eagerly, tf.test and tf.summary odds and ends,
tf.nn.experimental's dropouts, and argument names/orders a signature diff against TF
found different (tf.linspace's TF 2 graph, matmul's output_type, top_k's index_type,
map_fn's fn_output_signature, confusion_matrix's positional dtype, renamed arguments)."""

import io
from contextlib import redirect_stdout

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos import NodeDef


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default():
        yield


def _run(*fetches, feed=None):
    with tf.Session() as s:
        return s.run(list(fetches), feed)


def test_autograph_outside_conversion():
    ag = tf.autograph
    feature = ag.experimental.Feature
    assert len(feature.all()) == 7
    assert sorted(f.value for f in feature.all_but(feature.LISTS)) == [
        "ASSERT_STATEMENTS", "AUTO_CONTROL_DEPS", "BUILTIN_FUNCTIONS", "EQUALITY_OPERATORS",
        "NAME_SCOPES",
    ]  # fmt: skip

    @ag.experimental.do_not_convert
    def f(x):
        "doc"
        return x * 2

    assert (f(3), f.__name__, f.__doc__) == (6, "f", "doc")
    g = ag.experimental.do_not_convert()(lambda x: x + 1)
    assert g(1) == 2
    assert ag.experimental.set_loop_options(parallel_iterations=3) is None
    out = io.StringIO()
    with redirect_stdout(out):
        ag.trace("a", 1)
    assert out.getvalue() == "a 1\n"
    assert _run(f(tf.constant(3.0))) == [6.0]
    with pytest.raises(NotImplementedError, match="never does"):
        ag.to_graph(f)
    with pytest.raises(NotImplementedError):
        ag.to_code(f)


def test_gfile_join_and_schemes(tmp_path):
    join = tf.io.gfile.join
    # TF 2.21's results.
    cases = {
        ("gs://x", "y"): "gs://x/y",
        ("gs://x/", "/y", "z"): "/y/z",
        ("gs://x", "y/", "/z"): "/z",
        ("a", "/b", "c"): "/b/c",
        ("file:///tmp", "a"): "file:///tmp/a",
        ("s3://b", "", "c"): "s3://b/c",
        ("x", ""): "x/",
    }
    for args, want in cases.items():
        assert join(*args) == want, args
    assert tf.io.gfile.get_registered_schemes() == ["file", ""]
    (tmp_path / "f.txt").write_text("hi")
    url = "file://" + str(tmp_path)
    assert tf.io.gfile.exists(url) and not tf.io.gfile.exists(url + "/nothere")
    with tf.io.gfile.GFile(url + "/f.txt") as f:
        assert f.read() == "hi"
    assert tf.io.gfile.glob(url + "/*.txt") == [url + "/f.txt"]
    with pytest.raises(tf.errors.UnimplementedError) as e:
        tf.io.gfile.exists("s3://x/y")
    assert e.value.message == "File system scheme 's3' not implemented (file: 's3://x/y')"


def test_run_functions_eagerly_builds_inline():
    @tf.function
    def f(x):
        return x * 2

    x = tf.placeholder(tf.float32)
    assert tf.config.functions_run_eagerly() is False
    tf.config.run_functions_eagerly(True)
    try:
        assert tf.config.functions_run_eagerly() is True
        assert tf.config.experimental_functions_run_eagerly() is True
        f(x)
        # TF 2.21: the function's ops land in the graph with no call node.
        assert [o.type for o in tf.get_default_graph().get_operations()] == [
            "Placeholder", "Const", "Mul",
        ]  # fmt: skip
    finally:
        tf.config.experimental_run_functions_eagerly(False)
    assert tf.config.functions_run_eagerly() is False


def test_test_and_summary_odds(monkeypatch):
    monkeypatch.setenv("TEST_SRCDIR", "/src")
    monkeypatch.setenv("TEST_WORKSPACE", "ws")
    assert tf.test.test_src_dir_path("a/b") == "/src/ws/tensorflow/a/b"
    with pytest.raises(RuntimeError, match="only be called in Eager mode"):
        tf.test.experimental.sync_devices()
    assert tf.test.is_cpu_target_available("x86") is False  # no XLA/LLVM backend here

    m = tf.summary.TaggedRunMetadata(tag="a", run_metadata=b"x")
    assert m.SerializeToString() == b"\n\x01a\x12\x01x"
    assert tf.summary.all_v2_summary_ops() == []
    with pytest.raises(RuntimeError, match="No default tf.contrib.summary.SummaryWriter found"):
        tf.summary.initialize()
    t = tf.summary.tensor_summary("t", tf.constant([1.0]), summary_description="hint")
    with pytest.raises(ValueError, match="Can't get_summary_description on TensorSummaryV2"):
        tf.summary.get_summary_description(t.op.node_def)
    nd = NodeDef(op="TensorSummary")
    nd.attr["description"].s = b'{"typeHint": "x"}'
    assert tf.summary.get_summary_description(nd).type_hint == "x"


def test_experimental_dropouts_equal_tf():
    x = tf.constant(np.arange(1, 13, dtype=np.float32).reshape(3, 4))
    r = tf.placeholder(tf.float32, [])
    outs = [
        tf.nn.experimental.stateless_dropout(x, 0.5, seed=[1, 0]),
        tf.nn.experimental.stateless_dropout(x, r, seed=[3, 4], noise_shape=[3, 1]),
        tf.nn.experimental.stateless_dropout(
            x, 0.3, seed=tf.constant([7, 9], tf.int64), rng_alg="philox"
        ),
        tf.nn.experimental.general_dropout(
            x, 0.25, lambda shape, dtype: tf.random.stateless_uniform(shape, [5, 6], dtype=dtype)
        ),
    ]
    assert [o.name for o in outs] == [
        "stateless_dropout/SelectV2:0", "stateless_dropout_1/SelectV2:0",
        "stateless_dropout_2/SelectV2:0", "general_dropout/SelectV2:0",
    ]  # fmt: skip
    want = [
        [[2.0, 0.0, 6.0, 0.0], [0.0, 0.0, 0.0, 16.0], [0.0, 20.0, 0.0, 0.0]],
        [[0, 0, 0, 0], [8.333333015441895, 10.0, 11.666666030883789, 13.333333015441895],
         [0, 0, 0, 0]],
        [[1.4285714626312256, 2.857142925262451, 4.285714149475098, 5.714285850524902],
         [7.142857551574707, 8.571428298950195, 0.0, 11.428571701049805],
         [12.85714340209961, 14.285715103149414, 15.714285850524902, 17.14285659790039]],
        [[1.3333333730697632, 2.6666667461395264, 4.0, 0.0],
         [6.6666669845581055, 8.0, 9.333333969116211, 10.666666984558105],
         [12.0, 13.333333969116211, 14.666666984558105, 0.0]],
    ]  # fmt: skip
    for got, w in zip(_run(*outs, feed={r: 0.4}), want):
        np.testing.assert_array_equal(got, np.float32(w))
    assert tf.nn.experimental.stateless_dropout(x, 0.0, seed=[1, 0]) is x
    with pytest.raises(ValueError, match=r"in the range \[0, 1\). Received: rate=1.0"):
        tf.nn.experimental.stateless_dropout(x, 1.0, seed=[1, 0])
    with pytest.raises(ValueError, match="must be a floating point tensor"):
        tf.nn.experimental.stateless_dropout(tf.constant([1, 2]), 0.5, seed=[1, 0])


def test_linspace_is_tf2s_linspace_nd():
    outs = [
        tf.linspace(0.0, 1.0, 4),
        tf.lin_space(-3.5, 7.25, 11),
        tf.linspace([0.0, 10.0], [1.0, 20.0], 3, axis=1),
        tf.linspace([[1.0, 2.0]], [3.0, 4.0], 3, axis=-1),
    ]
    # TF 2.21's compat.v1 names and static shapes.
    assert [o.name for o in outs] == [
        "linspace/Slice:0", "linspace_1/Slice:0", "linspace_2/Slice:0", "linspace_3/Slice:0",
    ]  # fmt: skip
    assert [o.shape.as_list() for o in outs] == [[4], [11], [2, 3], [1, 2, 3]]
    got = _run(*outs)
    np.testing.assert_array_equal(got[0], np.float32([0, 1 / 3, 2 / 3, 1]))
    np.testing.assert_allclose(got[1], np.linspace(-3.5, 7.25, 11), rtol=1e-6)
    np.testing.assert_array_equal(got[2], np.float32([[0, 0.5, 1], [10, 15, 20]]))
    assert got[1][0] == -3.5 and got[1][-1] == 7.25


def test_matmul_output_type_and_top_k_index_type():
    a = tf.constant(np.array([[100, 100], [1, 2]], np.int8))
    b = tf.constant(np.array([[100, 1], [100, 1]], np.int8))
    m = tf.matmul(a, b, output_type=tf.int32)
    assert (m.op.type, m.dtype, m.name) == ("BatchMatMulV3", tf.int32, "MatMul:0")
    mt = tf.matmul(a, b, transpose_b=True, output_type=tf.int32, grad_a=True)
    t = tf.nn.top_k([3.0, 1.0, 2.0], 2, index_type=tf.int64)
    assert t.indices.dtype == tf.int64 and tf.math.top_k is tf.nn.top_k
    got = _run(m, mt, t.indices)
    np.testing.assert_array_equal(got[0], [[20000, 200], [300, 3]])
    an, bn = np.int32([[100, 100], [1, 2]]), np.int32([[100, 1], [100, 1]])
    np.testing.assert_array_equal(got[1], an @ bn.T)
    assert got[2].dtype == np.int64 and got[2].tolist() == [0, 2]


def test_renamed_and_reordered_arguments():
    # TF 2.21's argument names, orders and values.
    c = tf.random.categorical(tf.math.log([[0.5, 0.5], [0.1, 0.9]]), 5, tf.int32, seed=3)
    assert c.dtype == tf.int32
    n = tf.random.stateless_normal([3], [4, 5], alg=None)
    cm = tf.math.confusion_matrix([0, 1, 1], [1, 1, 0], 2, tf.float32)
    m = tf.map_fn(
        lambda e: tf.cast(e, tf.int64) * 2,
        tf.constant([1.0, 2.0]),
        fn_output_signature=tf.TensorSpec([], tf.int64),
    )
    assert m.dtype == tf.int64
    ig, z = tf.math.igamma(a=2.0, x=1.5), tf.math.zeta(x=2.0, q=1.0)
    s1 = tf.strings.to_number(input=["1.5"])
    s2 = tf.strings.to_hash_bucket(input=["a"], num_buckets=10)
    got = _run(n, cm, m, ig, z, s1, s2)
    np.testing.assert_allclose(got[0], [0.3638363182544708, -0.21990865468978882,
                                        -0.809325635433197], rtol=1e-6)  # fmt: skip
    assert got[1].tolist() == [[0.0, 1.0], [1.0, 1.0]] and got[2].tolist() == [2, 4]
    np.testing.assert_allclose([got[3], got[4]], [0.44217455, 1.644934], rtol=1e-6)
    assert got[5].tolist() == [1.5] and got[6].tolist() == [8]
    with pytest.raises(ValueError, match="Cannot specify both 'string_tensor' and 'input'."):
        tf.strings.to_number("1", input="2")

    img = tf.zeros([2, 3, 4, 1])
    assert tf.image.transpose(img).name == "transpose/transpose:0"
    assert tf.image.transpose(img, name="tt").name == "tt/tt:0"
    assert tf.nn.avg_pool2d(value=img, ksize=2, strides=1, padding="SAME").shape == img.shape
    p = tf.image.extract_image_patches(img, sizes=[1, 2, 2, 1], strides=[1, 1, 1, 1],
                                       rates=[1, 1, 1, 1], padding="VALID")  # fmt: skip
    assert p.shape.as_list() == [2, 2, 3, 4]
    assert tf.image.extract_jpeg_shape(contents=tf.constant(b"")).dtype == tf.int32

    v = tf.Variable(1.0)
    assert tf.is_variable_initialized(variable=v).dtype == tf.bool
    parts = tf.create_partitioned_variables(
        shape=[4, 2], slicing=[2, 1], initializer=tf.zeros_initializer()
    )
    assert [p.shape.as_list() for p in parts] == [[2, 2], [2, 2]]
    with pytest.raises(ValueError) as e:
        tf.create_partitioned_variables([2, 3], [1], initializer=tf.zeros_initializer())
    assert str(e.value) == (
        "The 'shape' and 'slicing' of a partitioned Variable must have the length: "
        "shape: [2, 3], slicing: [1]"
    )


def test_gfile_v2_names_stat_and_walk(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("")
    (tmp_path / "g").write_text("12345")
    top = str(tmp_path)
    # TF 2.21: lowercase functions take TF 2's argument names; walk yields name lists.
    assert tf.io.gfile.exists(path=top) and tf.io.gfile.isdir(path=top + "/a")
    assert list(tf.io.gfile.walk(top)) == [(top, ["a"], ["g"]), (top + "/a", [], ["f"])]
    assert list(tf.io.gfile.walk(top, topdown=False)) == [
        (top + "/a", [], ["f"]), (top, ["a"], ["g"]),
    ]  # fmt: skip
    errs = []
    assert list(tf.io.gfile.walk(top + "/nothere", onerror=errs.append)) == []
    assert isinstance(errs[0], tf.errors.NotFoundError)
    st = tf.io.gfile.stat(path=top + "/g")
    assert (st.length, st.is_directory) == (5, False) and st.mtime_nsec % 10**9 == 0
    assert tf.gfile.Stat(top).is_directory
    tf.io.gfile.copy(src=top + "/g", dst=top + "/h")
    tf.io.gfile.rename(src=top + "/h", dst=top + "/i")
    assert tf.io.gfile.glob(pattern=top + "/[hi]") == [top + "/i"]


def test_bad_indices_policy():
    def run(t):
        with tf.Session() as s:
            return s.run(t).tolist()

    # TF 2.21's values: IGNORE drops out-of-range updates and reads zeros for them.
    assert run(tf.scatter_nd([[0], [7]], [1.0, 2.0], [3], bad_indices_policy="IGNORE")) == [
        1.0, 0.0, 0.0,
    ]  # fmt: skip
    t = tf.tensor_scatter_nd_add(tf.ones([3]), [[0], [7]], [1.0, 2.0], bad_indices_policy="IGNORE")
    assert run(t) == [2.0, 1.0, 1.0]
    t = tf.tensor_scatter_nd_max(tf.ones([3]), [[0], [7]], [5.0, 2.0], bad_indices_policy="IGNORE")
    assert run(t) == [5.0, 1.0, 1.0]
    params = tf.reshape(tf.range(12.0), [3, 4])
    g = tf.gather_nd(params, [[0], [-1], [2]], bad_indices_policy="IGNORE")
    assert run(g) == [[0.0, 1.0, 2.0, 3.0], [0.0] * 4, [8.0, 9.0, 10.0, 11.0]]
    for policy in ("ERROR", ""):
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not index into"):
            run(tf.gather_nd(params, [[0], [-1]], bad_indices_policy=policy))
    with pytest.raises(tf.errors.InvalidArgumentError, match="No OpKernel was registered"):
        run(tf.gather_nd(params, [[0]], bad_indices_policy="bogus"))


def test_small_signature_fixes():
    v = tf.Variable([1.0, 2.0])
    # TF1's defaults: only the Update scatters lock.
    assert tf.scatter_add(v, [0], [1.0]).op.get_attr("use_locking") is False
    assert tf.scatter_update(v, [0], [1.0]).op.get_attr("use_locking") is True
    assert tf.scatter_nd_add(v, [[0]], [1.0]).op.get_attr("use_locking") is False
    for f in (tf.zeros, tf.ones):
        with pytest.raises(NotImplementedError, match="DTensor"):
            f([2], layout="x")
    assert tf.convert_to_tensor(1, dtype_hint=tf.float32).dtype == tf.float32
    with pytest.raises(ValueError, match="Cannot specify both"):
        tf.convert_to_tensor(1, preferred_dtype=tf.int64, dtype_hint=tf.float32)
    s = tf.sparse.segment_sum(tf.ones([3, 2]), [0, 2], [0, 0], sparse_gradient=True)
    c = tf.constant(3, name="k")
    sig = tf.saved_model.build_signature_def(
        inputs={"x": tf.saved_model.build_tensor_info(c)}, defaults={"k": c}
    )
    assert sig.defaults["k"].int_val == [3]
    with pytest.raises(ValueError, match="Unable to convert object"):
        tf.saved_model.build_signature_def(defaults={"k": c + 1})
    assert _run(s)[0].tolist() == [[2.0, 2.0]]


def test_nest_expand_composites():
    sp = tf.SparseTensor([[0, 0]], [1.0], [2, 2])
    flat = tf.nest.flatten({"a": sp, "b": 1}, expand_composites=True)
    # TF 2.21: a SparseTensor's components are indices, values, dense_shape.
    assert flat[:3] == [sp.indices, sp.values, sp.dense_shape] and flat[3] == 1
    assert tf.nest.flatten(sp) == [sp]
    rt = tf.ragged.constant([[1, 2], [3]])
    assert tf.nest.flatten(rt, expand_composites=True) == [rt.flat_values, *rt.nested_row_splits]
    new = [tf.constant([[1, 1]], tf.int64), tf.constant([5.0]), tf.constant([2, 2], tf.int64), 7]
    packed = tf.nest.pack_sequence_as({"a": sp, "b": 1}, new, expand_composites=True)
    assert isinstance(packed["a"], tf.SparseTensor) and packed["b"] == 7
    doubled = tf.nest.map_structure(
        lambda t: t * 2 if t.dtype == tf.int32 else t, rt, expand_composites=True
    )
    assert _run(doubled.flat_values)[0].tolist() == [2, 4, 6]
    tf.nest.assert_same_structure(nest1=sp, nest2=sp, expand_composites=True)
    with pytest.raises(TypeError):
        tf.nest.assert_same_structure(sp, [1, 2, 3], expand_composites=True)


def test_dataset_constructors_take_tf2_keywords(tmp_path):
    path = str(tmp_path / "lines.txt")
    with open(path, "w") as f:
        f.write("a\nb\n")
    ds = tf.data.TextLineDataset([path], name="lines")
    it = tf.data.make_one_shot_iterator(ds).get_next()
    with tf.Session() as s:
        assert [s.run(it), s.run(it)] == [b"a", b"b"]
    assert tf.data.TFRecordDataset([path], name="r").output_types == tf.string
    fixed = tf.data.FixedLengthRecordDataset([path], 2, name="f")
    assert fixed.output_types == tf.string
    r = tf.data.experimental.RandomDataset(3, rerandomize_each_iteration=True, name="q")
    assert r.output_types == tf.int64


def test_dropout_rate_may_be_a_variable():
    # TF takes any tensor-like rate (a Variable too), divided out as x / (1 - rate).
    r = tf.Variable(0.5)
    d = tf.nn.dropout(tf.ones([2, 1000]), rate=r, seed=1)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        v = s.run(d)
    assert set(np.unique(v).tolist()) == {0.0, 2.0} and 0.4 < (v == 0).mean() < 0.6
