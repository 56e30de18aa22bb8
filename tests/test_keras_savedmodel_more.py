"""Keras SavedModels beyond the config: the traced call functions (`__call__`,
`call_and_return_all_conditional_losses`, keras_api), subclassed models revived from them,
and the optimizer's state (include_optimizer=True), against TF 2.21's tf_keras.

tests/fixtures/keras_savedmodel_more_cases.py recorded TF's SavedModels
(keras_savedmodel_more/tf_<case>), asyncflow's (af_<case>) and keras_savedmodel_more_tf.json:
TF's predictions and losses, the same after tf_keras' load_model of either SavedModel, and
TF's plain tf.saved_model.load of these and of keras_savedmodel/{tf,af}_<case> (the model
object called, its keras_api function called).
"""

import json
import pathlib
import shutil
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos.saved_metadata_pb2 import SavedMetadata
from asyncflow.protos.saved_model_pb2 import SavedModel

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_savedmodel_cases as base  # noqa: E402
import keras_savedmodel_more_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_savedmodel_more_tf.json").read_text())
BASE_RECORDED = json.loads((FIXTURES / "keras_savedmodel_tf.json").read_text())
SAVED = FIXTURES / "keras_savedmodel_more"
K = tf.keras

# TF 2 behaviour on, as the recorder ran TF; `keras_session` is a fresh graph and Session.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("keras_v2_behavior")]


def _close(got, want, rtol=1e-5):
    np.testing.assert_allclose(got, np.array(want, np.float32), rtol=rtol, atol=1e-6)


def _object_graph(path):
    sm = SavedModel()
    sm.ParseFromString((pathlib.Path(path) / "saved_model.pb").read_bytes())
    return sm.meta_graphs[0].object_graph_def


def nest_list(x):
    return list(x) if isinstance(x, list | tuple) else [x]


def _keys(path) -> list:
    return sorted(k for k, _ in tf.train.list_variables(str(path / "variables" / "variables")))


# -- the traced call functions: TF's plain tf.saved_model.load calls our model ---------------


@pytest.mark.parametrize("case", base.CASES)
def test_tf_plain_load_calls_af_model_as_its_own(case):
    """TF's tf.saved_model.load of asyncflow's Keras SavedModel: the object called, and
    its keras_api.call_and_return_conditional_losses, give TF's predictions of its own."""
    ours, theirs = RECORDED["plain"][f"base_af_{case}"], RECORDED["plain"][f"base_tf_{case}"]
    for key in ("call", "keras_api"):
        for got, want in zip(ours[key], theirs[key], strict=True):
            _close(got, want)
    for got, want in zip(ours["call"], BASE_RECORDED[case]["predict"], strict=True):
        _close(got, want)
    assert ours["losses"] == theirs["losses"] == 0


@pytest.mark.parametrize("who", ["tf", "af"])
@pytest.mark.parametrize("case", ["seq", "fn"])
def test_load_v2_object_is_callable(keras_session, who, case):
    """asyncflow's tf.saved_model.load_v2 of either Keras SavedModel: the model object is
    callable (its `__call__` function), training defaulting to False."""
    loaded = tf.saved_model.load_v2(str(FIXTURES / "keras_savedmodel" / f"{who}_{case}"))
    xs = [tf.constant(x) for x in base.inputs(case)]
    out = loaded(xs[0] if len(xs) == 1 else xs)
    outputs, losses = loaded.keras_api.call_and_return_conditional_losses(
        xs[0] if len(xs) == 1 else xs, training=False
    )
    keras_session.run(tf.global_variables_initializer())
    got = keras_session.run(nest_list(out))
    for g, w in zip(got, BASE_RECORDED[case]["predict"], strict=True):
        _close(g, w)
    for g, w in zip(keras_session.run(nest_list(outputs)), got, strict=True):
        _close(g, w)
    assert losses == []


def test_call_functions_as_tf(keras_session, tmp_path):
    """The root's and each layer's children, their functions' argument specs and traces,
    the root's keras_api (with the compiled metric) are TF's."""
    base.build(K, "seq").save(str(tmp_path / "m"))
    ours, theirs = (
        _object_graph(tmp_path / "m"),
        _object_graph(FIXTURES / "keras_savedmodel" / "tf_seq"),
    )

    def root(og):
        names = [c.local_name for c in og.nodes[0].children]
        return [n for n in names if n != "_default_save_signature"]

    assert root(ours) == root(theirs)

    def traces(og, name):
        node = og.nodes[next(c.node_id for c in og.nodes[0].children if c.local_name == name)]
        fn = node.function
        sigs = [
            og.concrete_functions[c].canonicalized_input_signature for c in fn.concrete_functions
        ]
        training = [s.tuple_value.values[0].tuple_value.values[1].bool_value for s in sigs]
        return fn.function_spec.fullargspec, training

    for name in ("__call__", "call_and_return_all_conditional_losses"):
        assert traces(ours, name) == traces(theirs, name)

    def layer_nodes(og):
        """Each layer's children, and its functions' argument specs and trace count."""
        out = []
        for child in og.nodes[0].children:
            if not child.local_name.startswith("layer-"):
                continue
            node = og.nodes[child.node_id]
            fns = [
                (c.local_name, og.nodes[c.node_id].function.function_spec.fullargspec,
                 len(og.nodes[c.node_id].function.concrete_functions))
                for c in node.children
                if og.nodes[c.node_id].WhichOneof("kind") == "function"
            ]  # fmt: skip
            # (TF's Dropout also keeps its random generator object, asyncflow's has none)
            names = [c.local_name for c in node.children if c.local_name != "_random_generator"]
            out.append((names, fns))
        return out

    assert layer_nodes(ours) == layer_nodes(theirs)

    def api(og):
        node = og.nodes[
            next(c.node_id for c in og.nodes[0].children if c.local_name == "keras_api")
        ]
        return [c.local_name for c in node.children]

    assert api(ours) == [n for n in api(theirs) if n != "_default_save_signature"]
    # the compiled metric's variables under keras_api, as TF keys them
    assert _keys(tmp_path / "m") == _keys(FIXTURES / "keras_savedmodel" / "tf_seq")
    md = SavedMetadata()
    md.ParseFromString((tmp_path / "m" / "keras_metadata.pb").read_bytes())
    metric = next(n for n in md.nodes if n.node_path == "root.keras_api.metrics.0")
    assert metric.identifier == "_tf_keras_metric"
    assert json.loads(metric.metadata)["config"]["fn"] == "categorical_accuracy"


# -- subclassed models: revived from the traced call, both ways -----------------------------


def test_tf_subclassed_savedmodel_revives(keras_session):
    model = K.models.load_model(str(SAVED / "tf_sub"))
    assert type(model).__name__ == RECORDED["sub"]["tf_loaded"]["class"] == "Sub"
    _close(model.predict(cases.X_SUB), RECORDED["sub"]["predict"])
    assert len(model.weights) == RECORDED["sub"]["tf_loaded"]["weights"]


def test_tf_subclassed_savedmodel_with_custom_class_keeps_weights(keras_session):
    """TF's subclassed model's config is {}: given the class, the model is still revived
    from the traced call (asyncflow does not restore a rebuilt one by its object graph),
    with the saved weights."""
    model = K.models.load_model(str(SAVED / "tf_sub"), custom_objects={"Sub": cases.subclass(K)})
    _close(model.predict(cases.X_SUB), RECORDED["sub"]["predict"])


def test_revived_model_trains_as_the_original(keras_session):
    """The revived model's weights are the saved variables, trained through the restored
    call: its SGD losses are those of the same model built in code (TF 2.21 cannot train
    a revived model in graph mode: the gradient of its restored call fails)."""
    want = cases.train_sgd(K, cases.build(K, "sub"))
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        revived = K.models.load_model(str(SAVED / "tf_sub"))
        assert revived.optimizer is None
        _close(cases.train_sgd(K, revived), want, rtol=1e-5)
        assert [w.name for w in revived.trainable_weights] == [
            "sub/dense/kernel:0",
            "sub/dense/bias:0",
            "sub/dense_1/kernel:0",
            "sub/dense_1/bias:0",
        ]


def test_af_subclassed_savedmodel_as_tf(keras_session, tmp_path):
    """Our subclassed model's SavedModel: TF's keys and object layout, loaded here and (as
    recorded) by TF's load_model and plain load with the model's predictions."""
    model = cases.build(K, "sub")
    want = model.predict(cases.X_SUB)
    _close(want, RECORDED["sub"]["predict"])
    model.save(str(tmp_path / "m"))
    assert _keys(tmp_path / "m") == RECORDED["sub"]["keys"]["tf"]
    md = SavedMetadata()
    md.ParseFromString((tmp_path / "m" / "keras_metadata.pb").read_bytes())
    root = json.loads(md.nodes[0].metadata)
    assert (root["class_name"], root["is_graph_network"], root["expects_training_arg"]) == (
        "Sub",
        False,
        False,
    )
    assert [n.node_path for n in md.nodes] == ["root", "root.d1", "root.d2"]
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(str(tmp_path / "m"))
        assert type(loaded).__name__ == "Sub"
        _close(loaded.predict(cases.X_SUB), want)
    # TF on the committed one
    for rec in (RECORDED["sub"]["af_loaded"], RECORDED["plain"]["af_sub"]):
        got = rec["predict"] if "predict" in rec else rec["call"][0]
        _close(got, RECORDED["sub"]["predict"])


def test_tf_savedmodel_without_config_is_revived(keras_session, tmp_path):
    """A model saved without its config is revived from its traced call, though its
    class is known: TF's seq SavedModel with the config removed from its metadata."""
    shutil.copytree(FIXTURES / "keras_savedmodel" / "tf_seq", tmp_path / "m")
    md = SavedMetadata()
    md.ParseFromString((tmp_path / "m" / "keras_metadata.pb").read_bytes())
    meta = json.loads(md.nodes[0].metadata)
    del meta["config"]
    md.nodes[0].metadata = json.dumps(meta)
    (tmp_path / "m" / "keras_metadata.pb").write_bytes(md.SerializeToString())
    model = K.models.load_model(str(tmp_path / "m"))
    assert type(model).__name__ == "Sequential" and not model._is_graph_network
    preds = model.predict(base.X_SEQ)
    _close(preds, BASE_RECORDED["seq"]["predict"][0])
    assert model.optimizer is not None  # (compiled from the training config)


def test_revive_without_traced_call_is_a_value_error(keras_session, tmp_path):
    shutil.copytree(SAVED / "tf_sub", tmp_path / "m")
    sm = SavedModel()
    sm.ParseFromString((tmp_path / "m" / "saved_model.pb").read_bytes())
    og = sm.meta_graphs[0].object_graph_def
    api = next(c.node_id for c in og.nodes[0].children if c.local_name == "keras_api")
    kept = [c for c in og.nodes[api].children if not c.local_name.startswith("call_and_return")]
    del og.nodes[api].children[:]
    og.nodes[api].children.extend(kept)
    (tmp_path / "m" / "saved_model.pb").write_bytes(sm.SerializeToString())
    with pytest.raises(ValueError, match="traced call"):
        K.models.load_model(str(tmp_path / "m"))


# -- the optimizer's state ------------------------------------------------------------------


def test_optimizer_state_saved_as_tf_and_load_model_trains_as_tf(keras_session, tmp_path):
    """Adam's iterations, hyperparameters and slots are saved under TF's keys; after
    load_model the weights are restored and the optimizer starts afresh (iterations 0,
    zero slots), as TF's load_model of a SavedModel does: TF's losses step by step."""
    model = cases.build(K, "adam")
    rec = RECORDED["adam"]
    _close(cases.train(model), rec["before"])
    model.save(str(tmp_path / "m"))
    assert _keys(tmp_path / "m") == rec["keys"]["tf"]
    _close(cases.train(model), rec["continued"])
    for path in (tmp_path / "m", SAVED / "tf_adam"):
        with tf.Graph().as_default(), tf.Session() as sess:
            K.backend.set_session(sess)
            loaded = K.models.load_model(str(path))
            _close(loaded.predict(cases.X_ADAM), rec["predict"])
            assert (
                K.backend.get_value(loaded.optimizer.iterations)
                == rec["tf_loaded"]["iterations"]
                == 0
            )
            _close(cases.train(loaded), rec["tf_loaded"]["train"], rtol=1e-4)
    # TF's load_model of our SavedModel trains as of its own
    _close(rec["af_loaded"]["train"], rec["tf_loaded"]["train"], rtol=1e-5)


def test_optimizer_slots_in_object_graph(keras_session, tmp_path):
    """The optimizer node lists its slot variables (m, v per weight) as TF's does."""
    model = cases.build(K, "adam")
    cases.train(model, 1)
    model.save(str(tmp_path / "m"))

    def slots(og):
        root = og.nodes[0]
        opt = next(c.node_id for c in root.children if c.local_name == "optimizer")
        node = og.nodes[opt]
        return (
            [c.local_name for c in node.children],
            [s.slot_name for s in node.slot_variables],
            node.user_object.identifier,
        )

    assert slots(_object_graph(tmp_path / "m")) == slots(_object_graph(SAVED / "tf_adam"))


def test_include_optimizer_false_writes_no_optimizer(keras_session, tmp_path):
    model = cases.build(K, "adam")
    cases.train(model, 1)
    model.save(str(tmp_path / "m"), include_optimizer=False)
    assert not any(
        k.startswith("optimizer/") or "OPTIMIZER_SLOT" in k for k in _keys(tmp_path / "m")
    )
