"""Arguments as TF 2.21's (tf.compat.v1, tf_keras 2.21 in graph mode) where asyncflow's
differed: names, positional order, keyword-only arguments, and what the newly taken
arguments do.  Signatures and values were recorded from TF 2.21."""

import inspect
import os

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras


def _params(fn):
    return [p for p in inspect.signature(fn).parameters if p != "self"]


# (recorded from TF 2.21: inspect.signature of the same name)
SIGNATURES = {
    "scatter_nd": (tf.scatter_nd, ["indices", "updates", "shape", "bad_indices_policy", "name"]),
    "tensor_scatter_nd_add": (
        tf.tensor_scatter_nd_add,
        ["tensor", "indices", "updates", "bad_indices_policy", "name"],
    ),
    "tensor_scatter_sub": (
        tf.tensor_scatter_sub,
        ["tensor", "indices", "updates", "bad_indices_policy", "name"],
    ),
    "rfftnd": (tf.rfftnd, ["input", "fft_length", "axes", "Tcomplex", "name"]),
    "irfftnd": (tf.irfftnd, ["input", "fft_length", "axes", "Treal", "name"]),
    "fftnd": (tf.fftnd, ["input", "fft_length", "axes", "name"]),
    "function": (
        tf.function,
        [
            "func",
            "input_signature",
            "autograph",
            "jit_compile",
            "reduce_retracing",
            "experimental_implements",
            "experimental_autograph_options",
            "experimental_attributes",
            "experimental_relax_shapes",
            "experimental_compile",
            "experimental_follow_type_hints",
        ],
    ),  # fmt: skip
    "save_model": (
        K.models.save_model,
        ["model", "filepath", "overwrite", "save_format", "kwargs"],
    ),
    "load_model": (
        K.models.load_model,
        ["filepath", "custom_objects", "compile", "safe_mode", "kwargs"],
    ),
    "Model.save": (K.Model.save, ["filepath", "overwrite", "save_format", "kwargs"]),
    "activations.serialize": (K.activations.serialize, ["activation", "use_legacy_format"]),
    "layers.deserialize": (
        K.layers.deserialize,
        ["config", "custom_objects", "use_legacy_format"],
    ),
    "optimizers.deserialize": (
        K.optimizers.deserialize,
        ["config", "custom_objects", "use_legacy_format", "kwargs"],
    ),
    "regularizers.l1": (K.regularizers.l1, ["l1", "kwargs"]),
    "regularizers.l2": (K.regularizers.l2, ["l2", "kwargs"]),
    "utils.deserialize_keras_object": (
        K.utils.deserialize_keras_object,
        ["config", "custom_objects", "safe_mode", "kwargs"],
    ),
    "utils.serialize_keras_object": (K.utils.serialize_keras_object, ["obj"]),
    "backend.name_scope": (K.backend.name_scope, ["name", "default_name", "values"]),
    "backend.sparse_categorical_crossentropy": (
        K.backend.sparse_categorical_crossentropy,
        ["target", "output", "from_logits", "axis", "ignore_class"],
    ),
    "CallbackList": (
        K.callbacks.CallbackList,
        ["callbacks", "add_history", "add_progbar", "model", "params"],
    ),
    "ProgbarLogger": (K.callbacks.ProgbarLogger, ["count_mode", "stateful_metrics"]),
    "InputSpec": (
        K.layers.InputSpec,
        [
            "dtype",
            "shape",
            "ndim",
            "max_ndim",
            "min_ndim",
            "axes",
            "allow_last_axis_squeeze",
            "name",
            "optional",
        ],
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature(name):
    fn, expected = SIGNATURES[name]
    assert _params(fn) == expected


def test_convert_to_tensor_positional_dtype_hint():
    params = inspect.signature(tf.convert_to_tensor).parameters
    assert list(params)[:5] == ["value", "dtype", "name", "preferred_dtype", "dtype_hint"]
    with tf.Graph().as_default():
        assert tf.convert_to_tensor(1, None, None, None, tf.float32).dtype == tf.float32


def test_positional_policy_and_type_attrs():
    with tf.Graph().as_default(), tf.Session() as sess:
        out = tf.scatter_nd([[0], [7]], [1.0, 2.0], [4], "IGNORE")
        spec = tf.rfftnd(tf.constant([[1.0, 2.0], [3.0, 4.0]]), [2, 2], [0, 1], tf.complex64)
        assert spec.dtype == tf.complex64
        np.testing.assert_array_equal(sess.run(out), [1.0, 0.0, 0.0, 0.0])


def test_serialize_use_legacy_format_same_either_way():
    # (TF 2.21 in graph mode writes the legacy dicts for both values)
    for legacy in (False, True):
        assert K.activations.serialize(K.activations.relu, use_legacy_format=legacy) == "relu"
        assert K.regularizers.serialize(K.regularizers.l2(0.1), use_legacy_format=legacy) == {
            "class_name": "L2",
            "config": {"l2": 0.10000000149011612},
        }
        assert K.initializers.serialize(
            K.initializers.glorot_uniform(seed=1), use_legacy_format=legacy
        ) == {"class_name": "GlorotUniform", "config": {"seed": 1, "dtype": "float32"}}


def test_regularizer_classes_and_old_argument():
    assert K.regularizers.l1 is K.regularizers.L1
    assert K.regularizers.l1(l=0.3).get_config() == {"l1": 0.30000001192092896}
    assert K.regularizers.l2(0.3).get_config() == {"l2": 0.30000001192092896}
    with pytest.raises(TypeError, match="Argument\\(s\\) not recognized"):
        K.regularizers.L2(0.1, foo=1)


def test_optimizers_deserialize_kwargs():
    opt = K.optimizers.deserialize(
        {"class_name": "SGD", "config": {"learning_rate": 0.5}}, use_legacy_optimizer=True
    )
    assert type(opt).__name__ == "SGD"
    with pytest.raises(TypeError, match="Invalid keyword arguments"):
        K.optimizers.deserialize({"class_name": "SGD", "config": {}}, foo=1)


def test_deserialize_keras_object_api():
    with tf.Graph().as_default():
        layer = K.utils.deserialize_keras_object(
            {"class_name": "Dense", "config": {"units": 3, "name": "x"}},
            module_objects={"Dense": K.layers.Dense},
        )
        assert type(layer).__name__ == "Dense" and layer.units == 3
        with pytest.raises(ValueError, match="Unknown "):
            K.utils.deserialize_keras_object({"class_name": "Dense", "config": {"units": 3}})
        with pytest.raises(ValueError, match=r"not supported: \['foo'\]"):
            K.utils.deserialize_keras_object({"class_name": "Dense", "config": {}}, foo=1)


def _model():
    return K.Sequential([K.layers.Dense(2, input_shape=(3,))])


def test_save_model_keyword_arguments(tmp_path):
    # (messages recorded from tf_keras 2.21)
    with tf.Graph().as_default():
        model = _model()
        with pytest.raises(ValueError, match=r"native TF-Keras format: \['include_optimizer'\]"):
            K.models.save_model(model, str(tmp_path / "a.keras"), include_optimizer=False)
        K.models.save_model(model, str(tmp_path / "a.h5"), include_optimizer=False)
        with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
            K.models.save_model(model, str(tmp_path / "b.h5"), foo=1)
        model.save(str(tmp_path / "c.h5"), include_optimizer=False)
        assert os.path.exists(tmp_path / "c.h5")
    with tf.Graph().as_default():
        K.models.load_model(str(tmp_path / "a.h5"), options=None)
        with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
            K.models.load_model(str(tmp_path / "a.h5"), foo=1)


def test_callback_list_and_progbar():
    seen = []

    class Record(K.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(("epoch", epoch, logs, self.params.get("epochs")))

        def on_train_begin(self, logs=None):
            seen.append(("train", logs))

    cbs = K.callbacks.CallbackList([Record()], add_history=True, add_progbar=True, epochs=3)
    kinds = [type(c).__name__ for c in cbs.callbacks]
    assert kinds == ["Record", "History", "ProgbarLogger"]
    cbs.on_train_begin()
    cbs.on_epoch_begin(0)
    cbs.on_epoch_begin(1, {"a": 1})
    assert seen == [("train", None), ("epoch", 0, None, 3), ("epoch", 1, {"a": 1}, 3)]
    with pytest.raises(ValueError, match="Unknown `count_mode`: x"):
        K.callbacks.ProgbarLogger(count_mode="x")


def test_input_spec_labels():
    spec = K.layers.InputSpec(
        shape=(None, 3), name="x", optional=True, allow_last_axis_squeeze=True
    )
    assert (spec.name, spec.optional, spec.allow_last_axis_squeeze) == ("x", True, True)
    assert repr(spec) == "InputSpec(shape=(None, 3), ndim=2)"
    assert spec.get_config() == {
        "dtype": None, "shape": (None, 3), "ndim": 2, "max_ndim": None, "min_ndim": None,
        "axes": {},
    }  # fmt: skip


def test_name_scope_default_name():
    with tf.Graph().as_default():
        with K.backend.name_scope(None, "def", []) as scope:
            assert scope == "def/"


def test_ignore_class_values():
    # (recorded from TF 2.21 / tf_keras 2.21, graph mode)
    with tf.Graph().as_default(), tf.Session() as sess:
        m = K.metrics.IoU(num_classes=3, target_class_ids=[0, 1], ignore_class=2)
        u = m.update_state(tf.constant([0, 1, 2, 1]), tf.constant([0, 1, 1, 0]))
        m2 = K.metrics.MeanIoU(num_classes=3, ignore_class=0)
        u2 = m2.update_state(tf.constant([0, 1, 2, 1]), tf.constant([0, 1, 1, 0]))
        t = tf.constant([0, 1, 2])
        o = tf.constant([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
        loss = K.backend.sparse_categorical_crossentropy(t, o, ignore_class=1)
        t2 = tf.constant([[0, 1], [2, 1]])
        o2 = tf.constant([[[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]], [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4]]])
        loss2 = K.backend.sparse_categorical_crossentropy(t2, o2, ignore_class=1)
        loss3 = K.losses.SparseCategoricalCrossentropy(ignore_class=1)(t2, o2)
        sess.run(tf.variables_initializer(m.variables + m2.variables))
        sess.run([u, u2])
        got = sess.run([m.result(), m2.result(), loss, loss2, loss3])
    np.testing.assert_allclose(got[0], 0.5)
    np.testing.assert_allclose(got[1], 0.11111111)
    np.testing.assert_allclose(got[2], [0.35667497, 0.0, 0.5108256], rtol=1e-6)
    np.testing.assert_allclose(got[3], [[0.35667497, 0.0], [0.5108256, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(got[4], 0.43375027, rtol=1e-6)


def test_dtype_constructor():
    # (recorded from TF 2.21: tf.DType(enum) equals the module's type, as_dtype gives
    # the canonical instance, an unknown enum is a TypeError)
    assert _params(tf.DType) == ["type_enum", "handle_data"]
    d = tf.DType(1)
    assert d == tf.float32 and d is not tf.float32 and tf.as_dtype(d) is tf.float32
    assert repr(tf.DType(101)) == "tf.float32_ref" and tf.DType(101).base_dtype == tf.float32
    for bad in (999, 0, -1):
        with pytest.raises(TypeError, match="does not correspond to a valid tensorflow::DataType"):
            tf.DType(bad)
    with tf.Graph().as_default():
        assert tf.constant(1.0, dtype=tf.DType(2)).dtype is tf.float64


def test_keras_saving_namespace_and_legacy_utils():
    # (TF 2.21: keras.saving's save_model/load_model are keras.models'; the legacy
    # utils keep Keras 2's signatures; the interpreter takes TF's delegate switches)
    assert K.saving.save_model is K.models.save_model
    assert K.saving.load_model is K.models.load_model
    assert _params(K.utils.legacy.serialize_keras_object) == ["instance"]
    assert _params(K.utils.legacy.deserialize_keras_object) == [
        "identifier",
        "module_objects",
        "custom_objects",
        "printable_module_name",
    ]
    with tf.Graph().as_default():
        dense = K.utils.legacy.deserialize_keras_object(
            {"class_name": "Dense", "config": {"units": 2}}, {"Dense": K.layers.Dense}
        )
        assert dense.units == 2
    assert _params(tf.lite.Interpreter)[-2:] == [
        "experimental_disable_delegate_clustering",
        "experimental_default_delegate_latest_features",
    ]
