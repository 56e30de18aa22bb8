"""tf.compat.v1.saved_model.load_v2 on TF 2 SavedModels, in graph mode.

The SavedModels under fixtures/saved_model_v2/ were written by TF 2.21's
tf.saved_model.save (fixtures/record_saved_model_v2_tf.py); every expected value, name
and message below was recorded from TF 2.21's tf.compat.v1.saved_model.load_v2 in graph
mode on the same directories.

tf.saved_model.save: the module of fixtures/saved_model_v2_cases.py, saved by asyncflow,
was loaded by TF 2.21 (eager tf.saved_model.load, graph-mode load_v2 and TF1's
loader.load; the recorder's check_ours) to the values the save tests expect of
asyncflow's loaders.
"""

import os
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.saved_model.loader import read_saved_model

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
FIX = os.path.join(FIXTURES, "saved_model_v2")
sys.path.insert(0, FIXTURES)

import saved_model_v2_cases as cases  # noqa: E402


def _public(obj) -> list:
    return sorted(a for a in vars(obj) if not a.startswith("_"))


def _run(fetches):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches)


def test_module_with_variable_and_function():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(os.path.join(FIX, "module_var"))
        assert _public(m) == [
            "f", "graph_debug_info", "signatures", "tensorflow_git_version",
            "tensorflow_version", "v",
        ]  # fmt: skip
        assert (m.v.name, m.v.dtype, m.v.shape.as_list()) == ("v:0", tf.float32, [3])
        assert m.tensorflow_version == "2.21.0"
        y = m.f(tf.constant([2.0, 3.0, 4.0]))
        assert (y.dtype, y.shape.as_list()) == (tf.float32, [3])
        assert list(m.signatures.keys()) == ["serving_default"]
        assert [v.name for v in tf.global_variables()] == ["v:0"]
        v, y = _run([m.v, y])
    np.testing.assert_array_equal(v, np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(y, np.array([3.0, 7.0, 13.0], np.float32))


def test_restored_function_specs_and_python_arguments():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(os.path.join(FIX, "module_var"), tags=["serve"])
        sig = m.signatures["serving_default"]
        assert repr(sig.structured_input_signature) == (
            "((), {'x': TensorSpec(shape=(?,), dtype=tf.float32, name='x')})"
        )
        assert repr(sig.structured_outputs) == (
            "{'output_0': TensorSpec(shape=(3,), dtype=tf.float32, name='output_0')}"
        )
        assert repr(m.f.get_concrete_function().structured_input_signature) == (
            "((TensorSpec(shape=(?,), dtype=tf.float32, name='x'),), {})"
        )
        assert len(m.f.concrete_functions) == 1
        y = m.f([1.0, 2.0, 3.0])  # a Python list converts to the spec's dtype
        s = sig(x=tf.constant([0.0, 0.0, 1.0]))
        y, s = _run([y, s])
    np.testing.assert_array_equal(y, np.array([2.0, 5.0, 10.0], np.float32))
    np.testing.assert_array_equal(s["output_0"], np.array([1.0, 1.0, 4.0], np.float32))


def test_binding_errors():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(os.path.join(FIX, "module_var"))
        spec = "TensorSpec(shape=(?,), dtype=tf.float32, name='x')"
        x = tf.constant([1, 2, 3])
        with pytest.raises(TypeError) as e:
            m.f(x)
        assert str(e.value) == (
            "Binding inputs to tf.function failed due to `Can not cast "
            f"TensorSpec(shape=(3,), dtype=tf.int32, name='x') to {spec}`. Received args: "
            f"({x!r},) and kwargs: {{}} for signature: (x: {spec})."
        )
        x = tf.constant([[1.0]])
        with pytest.raises(TypeError, match=r"Can not cast TensorSpec\(shape=\(1, 1\)"):
            m.f(x)


def test_two_functions_and_nested_modules():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(os.path.join(FIX, "nested"))
        assert _public(m) == [
            "add", "b", "g", "graph_debug_info", "inner", "signatures",
            "tensorflow_git_version", "tensorflow_version",
        ]  # fmt: skip
        assert _public(m.inner) == ["scale", "w"]
        assert list(m.signatures.keys()) == []
        g = m.g(tf.constant(3.0))
        a = m.add(tf.constant([1, 2]), tf.constant([5, 7]))
        assert sorted(a) == ["diff", "sum"]
        sc = m.inner.scale(tf.constant(4.0))
        g, a, sc, b, w = _run([g, a, sc, m.b, m.inner.w])
    assert (g, sc, b, w) == (7.0, 8.0, 10, 2.0)
    np.testing.assert_array_equal(a["sum"], np.array([16, 19], np.int32))
    np.testing.assert_array_equal(a["diff"], np.array([-4, -5], np.int32))
    assert a["sum"].dtype == np.int32


def test_signatures():
    with tf.Graph().as_default():
        m = tf.compat.v1.saved_model.load_v2(os.path.join(FIX, "signatures"))
        assert sorted(m.signatures.keys()) == ["halve", "serving_default"]
        sd = m.signatures["serving_default"]
        assert type(sd).__name__ == "_WrapperFunction"
        assert sorted(sd.structured_outputs) == ["out", "total"]
        r = sd(inp=tf.constant([[1.0, 1.0], [0.0, 2.0]]))
        h = m.signatures["halve"](tf.constant(5.0))
        assert (sorted(r), sorted(h)) == (["out", "total"], ["output_0"])
        r2 = m.serve(tf.constant([[1.0, 0.0]]))
        r, h, r2 = _run([r, h, r2])
    np.testing.assert_array_equal(r["out"], np.array([[4.0, 6.0], [6.0, 8.0]], np.float32))
    assert (r["total"], h["output_0"], r2["total"]) == (4.0, 2.5, 1.0)
    np.testing.assert_array_equal(r2["out"], np.array([[1.0, 2.0]], np.float32))


def test_load_errors(tmp_path):
    missing = str(tmp_path / "nonexistent")
    with tf.Graph().as_default():
        with pytest.raises(OSError) as e:
            tf.saved_model.load_v2(missing)
        assert str(e.value) == (
            f"SavedModel file does not exist at: {missing}/{{saved_model.pbtxt|saved_model.pb}}"
        )
        path = os.path.join(FIX, "module_var")
        with pytest.raises(ValueError) as e:
            tf.saved_model.load_v2(path, tags=["train"])
        assert str(e.value) == (
            f"Got an incompatible argument to `tags`: ['train']. The SavedModel at {path} "
            "has one MetaGraph with tags ['serve']. You may omit the argument, pass 'None', "
            "or pass matching tags."
        )
        with pytest.raises(RuntimeError) as e:
            tf.saved_model.load_v2(os.path.join(FIX, "tf1"), tags=["train"])
        assert str(e.value) == (
            "MetaGraphDef associated with tags 'train' could not be found in SavedModel, with "
            "available tags '[{'serve'}]'. To inspect available tag-sets in the SavedModel, "
            "please use the SavedModel CLI: `saved_model_cli`."
        )


def test_tf1_saved_model_with_resource_variable():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(os.path.join(FIX, "tf1_resource"))
        assert type(m).__name__ == "AutoTrackable"
        assert [v.name for v in m.variables] == ["v:0"]
        assert [v.name for v in tf.global_variables()] == ["v:0"]
        assert list(m.signatures) == ["serving_default"]
        r = m.signatures["serving_default"](x=tf.constant([1.0, 2.0]))
        assert sorted(r) == ["y"]
        r = _run(r)
    np.testing.assert_array_equal(r["y"], np.array([3.0, 6.0], np.float32))


def test_tf1_saved_model_with_reference_variable_fails_at_run():
    # TF 2.21 in graph mode: the signature builds, no variables are listed, and running
    # it reads an uninitialized reference variable.
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(os.path.join(FIX, "tf1"))
        assert m.variables == []
        r = m.signatures["serving_default"](x=tf.constant([1.0, 2.0]))
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value"):
            _run(r)


def test_save_without_session_is_tf_error(tmp_path):
    with tf.Graph().as_default():
        m = tf.Module()
        m.v = tf.Variable(1.0, use_resource=True)
        path = str(tmp_path / "m")
        with pytest.raises(RuntimeError) as e:
            tf.saved_model.save(m, path)
    assert str(e.value) == (
        f'Unable to save checkpoint to "{path}/variables/variables" in graph mode without a '
        "default session. Please use `with tf.Session():` to create a session."
    )


def test_save_then_load_v2_gives_tfs_values(tmp_path):
    cases.save_module(tf, str(tmp_path))
    assert sorted(os.listdir(tmp_path / "signed")) == [
        "assets",
        "fingerprint.pb",  # (as TF 2.21 writes)
        "saved_model.pb",
        "variables",
    ]
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(tmp_path / "default"))
        assert _public(m) == [
            "f", "g", "graph_debug_info", "inner", "signatures", "tensorflow_git_version",
            "tensorflow_version", "v",
        ]  # fmt: skip
        assert list(m.signatures) == []  # (TF's too: the root has two functions)
        y = m.f(tf.constant([1.0, 2.0]))
        g = m.g(tf.constant([1.0, 1.0]), tf.constant(5.0))
        sc = m.inner.scale(tf.constant(3.0))
        v, w, y, g, sc = _run([m.v, m.inner.w, y, g, sc])
    np.testing.assert_array_equal(v, np.array([3.0, 4.0], np.float32))
    np.testing.assert_array_equal(y, np.array([5.0, 10.0], np.float32))
    np.testing.assert_array_equal(g["sum"], np.array([6.0, 6.0], np.float32))
    np.testing.assert_array_equal(g["prod"], np.array([3.0, 4.0], np.float32))
    assert (w, sc) == (2.0, 6.0)


def test_save_signatures(tmp_path):
    cases.save_module(tf, str(tmp_path))
    path = str(tmp_path / "signed")
    mg = read_saved_model(path).meta_graphs[0]
    assert sorted(mg.signature_def) == ["__saved_model_init_op", "serving_default", "two"]
    two = mg.signature_def["two"]
    assert (sorted(two.inputs), sorted(two.outputs)) == (["a", "b"], ["prod", "sum"])
    assert two.method_name == "tensorflow/serving/predict"
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(path)
        assert sorted(m.signatures) == ["serving_default", "two"]
        r = m.signatures["two"](a=tf.constant([1.0, 1.0]), b=tf.constant(5.0))
        sd = m.signatures["serving_default"](x=tf.constant([1.0, 2.0]))
        r, sd = _run([r, sd])
    np.testing.assert_array_equal(r["sum"], np.array([6.0, 6.0], np.float32))
    np.testing.assert_array_equal(r["prod"], np.array([3.0, 4.0], np.float32))
    np.testing.assert_array_equal(sd["output_0"], np.array([5.0, 10.0], np.float32))


def test_experimental_names():
    # TF 2.21: tf.compat.v1.saved_model.experimental lists exactly these three.
    exp = tf.compat.v1.saved_model.experimental
    assert exp.save is tf.saved_model.save
    assert [p.value for p in exp.VariablePolicy] == [
        None, "save_variable_devices", "expand_distributed_variables",
    ]  # fmt: skip

    class Handle(exp.TrackableResource):
        def _create_resource(self):
            return tf.constant(1)

    with tf.Graph().as_default():
        r = Handle(device="/CPU:0")
        assert r._resource_device == "/CPU:0"
        assert r.resource_handle is r.resource_handle
        assert r.resource_handle.dtype == tf.int32
    with pytest.raises(
        NotImplementedError, match=r"TrackableResource._create_resource not implemented"
    ):
        exp.TrackableResource()._create_resource()


def test_save_errors(tmp_path):
    class WithRef(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(1.0, name="v")  # a reference variable in graph mode

    with tf.Graph().as_default():
        m = WithRef()
        with tf.Session():
            # TF 2.21: ValueError (this message) for a non-function signature, checked
            # before the variables; TypeError for a reference variable.
            with pytest.raises(ValueError) as e:
                tf.saved_model.save(m, str(tmp_path / "a"), signatures=m)
            assert str(e.value) == (
                "Expected a TensorFlow function for which to generate a signature, but got "
                f"{m}. Only `tf.functions` with an input signature or concrete functions can "
                "be used as a signature."
            )
            with pytest.raises(TypeError, match="not a resource variable"):
                tf.saved_model.save(m, str(tmp_path / "b"))


def test_saved_v2_model_serves_through_tf1_loader(tmp_path):
    cases.save_module(tf, str(tmp_path))
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], str(tmp_path / "signed"))
        sig = mg.signature_def["two"]
        feed = {sig.inputs["a"].name: [1.0, 1.0], sig.inputs["b"].name: 5.0}
        out = sess.run({k: v.name for k, v in sig.outputs.items()}, feed)
    np.testing.assert_array_equal(out["sum"], np.array([6.0, 6.0], np.float32))
    np.testing.assert_array_equal(out["prod"], np.array([3.0, 4.0], np.float32))


def _check_traced(m):
    assert _public(m) == [
        "g", "graph_debug_info", "h", "signatures", "tensorflow_git_version",
        "tensorflow_version", "v",
    ]  # fmt: skip
    assert list(m.signatures) == []
    calls = [
        m.h(tf.constant([1.0, 2.0])),
        m.h(tf.constant(1.0), y=4),
        m.h(tf.constant(1.0), 4),
    ]
    with pytest.raises(ValueError, match="^Found zero restored functions for caller function.$"):
        m.g(tf.constant(1.0))
    x = tf.constant([1.0, 2.0])
    with pytest.raises(ValueError) as e:
        m.h(x, 5)
    assert str(e.value) == (
        "Could not find matching concrete function to call loaded from the SavedModel. Got:\n"
        f"  Positional arguments (2 total):\n    * {x!r}\n    * 5\n  Keyword arguments: {{}}\n\n"
        " Expected these arguments to match one of the following 2 option(s):\n\n"
        "Option 1:\n  Positional arguments (2 total):\n"
        "    * TensorSpec(shape=(2,), dtype=tf.float32, name='x')\n    * 3\n"
        "  Keyword arguments: {}\n\n"
        "Option 2:\n  Positional arguments (2 total):\n"
        "    * TensorSpec(shape=(), dtype=tf.float32, name='x')\n    * 4\n"
        "  Keyword arguments: {}"
    )
    a, b, c = _run(calls)
    np.testing.assert_array_equal(a, np.array([6.0, 12.0], np.float32))
    assert (b, c) == (8.0, 8.0)


def test_traced_functions_without_input_signature():
    with tf.Graph().as_default():
        _check_traced(tf.saved_model.load_v2(os.path.join(FIX, "traced")))


def test_save_traced_functions(tmp_path):
    cases.save_traced(tf, str(tmp_path))
    with tf.Graph().as_default():
        _check_traced(tf.saved_model.load_v2(str(tmp_path / "traced")))
