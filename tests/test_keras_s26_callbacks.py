"""tf.keras.callbacks.TensorBoard in TF1 graph mode: the event file it writes (one file in
log_dir, graph and meta graph, epoch_/batch_ scalars and their steps, weight, gradient and
activation histograms and weight images run with the validation batches), read back
with asyncflow's own tf.train.summary_iterator; BaseLogger's epoch averages and
RemoteMonitor's posts (requests.post replaced, no network).

Expected events were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1,
tf.disable_v2_behavior()) for the same script: values rounded to 5 (scalars) or 4
(histogram min/max/sum) decimals, images as (height, width, colorspace).
"""

import glob
import json
import os
import sys

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.backend.clear_session()


HIST = """\
step 0 file_version brain.Event:2
step 0 graph_def
step 0 meta_graph_def
step 0 batch_loss simple_value 9.95214
step 0 batch_mean_absolute_error simple_value 2.87667
step 1 batch_loss simple_value 7.95311
step 1 batch_mean_absolute_error simple_value 2.81793
step 0 d1/kernel_0 histo (6.0, 0.9221, 0.9401, 5.5767, 3)
step 0 d1/kernel_0_1/image/0 image (2, 3, 1)
step 0 d1/bias_0 histo (2.0, -0.1064, -0.1064, -0.2128, 3)
step 0 d1/bias_0_1/image/0 image (2, 1, 1)
step 0 d1_out histo (8.0, 1.3938, 2.0195, 13.3606, 6)
step 0 d2/kernel_0 histo (2.0, 0.7832, 0.7832, 1.5664, 3)
step 0 d2/kernel_0_1/image/0 image (2, 1, 1)
step 0 d2/bias_0 histo (1.0, -0.1127, -0.1127, -0.1127, 3)
step 0 d2_out histo (4.0, 2.0705, 3.0506, 10.0131, 7)
step 1 d1/kernel_0 histo (6.0, 0.9221, 0.9401, 5.5767, 3)
step 1 d1/kernel_0_1/image/0 image (2, 3, 1)
step 1 d1/bias_0 histo (2.0, -0.1064, -0.1064, -0.2128, 3)
step 1 d1/bias_0_1/image/0 image (2, 1, 1)
step 1 d1_out histo (8.0, 0.762, 2.3333, 12.1467, 9)
step 1 d2/kernel_0 histo (2.0, 0.7832, 0.7832, 1.5664, 3)
step 1 d2/kernel_0_1/image/0 image (2, 1, 1)
step 1 d2/bias_0 histo (1.0, -0.1127, -0.1127, -0.1127, 3)
step 1 d2_out histo (4.0, 1.0808, 3.5421, 9.0624, 9)
step 8 epoch_loss simple_value 8.95263
step 8 epoch_mean_absolute_error simple_value 2.81793
step 8 epoch_val_loss simple_value 4.31374
step 8 epoch_val_mean_absolute_error simple_value 1.90674
step 2 batch_loss simple_value 3.73718
step 2 batch_mean_absolute_error simple_value 1.66936
step 3 batch_loss simple_value 3.56391
step 3 batch_mean_absolute_error simple_value 1.74331
step 2 d1/kernel_0 histo (6.0, 0.884, 0.9099, 5.3637, 3)
step 2 d1/kernel_0_1/image/0 image (2, 3, 1)
step 2 d1/bias_0 histo (2.0, -0.1588, -0.1588, -0.3177, 3)
step 2 d1/bias_0_1/image/0 image (2, 1, 1)
step 2 d1_out histo (8.0, 0.6744, 1.5084, 9.4193, 7)
step 2 d2/kernel_0 histo (2.0, 0.6614, 0.6614, 1.3227, 3)
step 2 d2/kernel_0_1/image/0 image (2, 1, 1)
step 2 d2/bias_0 histo (1.0, -0.1824, -0.1824, -0.1824, 3)
step 2 d2_out histo (4.0, 0.7096, 1.8128, 5.4999, 8)
step 3 d1/kernel_0 histo (6.0, 0.884, 0.9099, 5.3637, 3)
step 3 d1/kernel_0_1/image/0 image (2, 3, 1)
step 3 d1/bias_0 histo (2.0, -0.1588, -0.1588, -0.3177, 3)
step 3 d1/bias_0_1/image/0 image (2, 1, 1)
step 3 d1_out histo (8.0, 1.3606, 2.1868, 14.1971, 8)
step 3 d2/kernel_0 histo (2.0, 0.6614, 0.6614, 1.3227, 3)
step 3 d2/kernel_0_1/image/0 image (2, 1, 1)
step 3 d2/bias_0 histo (1.0, -0.1824, -0.1824, -0.1824, 3)
step 3 d2_out histo (4.0, 1.6173, 2.7102, 8.6598, 8)
step 16 epoch_loss simple_value 3.65054
step 16 epoch_mean_absolute_error simple_value 1.74331
step 16 epoch_val_loss simple_value 2.16139
step 16 epoch_val_mean_absolute_error simple_value 1.29226
"""

BATCH_NO_VAL = """\
step 0 file_version brain.Event:2
step 1 batch_loss simple_value 6.56941
step 1 batch_mean_absolute_error simple_value 2.80144
step 8 epoch_loss simple_value 8.98206
step 8 epoch_mean_absolute_error simple_value 2.80144
step 3 batch_loss simple_value 2.95748
step 3 batch_mean_absolute_error simple_value 1.73722
step 16 epoch_loss simple_value 3.66743
step 16 epoch_mean_absolute_error simple_value 1.73722
"""

GRADS = """\
step 0 file_version brain.Event:2
step 0 d1/kernel_0 histo (6.0, 0.9234, 0.9414, 5.5782, 3)
step 0 d1/bias_0 histo (2.0, -0.1062, -0.1062, -0.2123, 3)
step 0 d1/kernel_0_grad histo (6.0, 1.5198, 2.1021, 10.7503, 6)
step 0 d1/bias_0_grad histo (2.0, 2.6048, 2.6048, 5.2095, 3)
step 0 d1_out histo (8.0, 0.7634, 2.3342, 11.9346, 7)
step 0 d2/kernel_0 histo (2.0, 0.784, 0.784, 1.568, 3)
step 0 d2/bias_0 histo (1.0, -0.1121, -0.1121, -0.1121, 3)
step 0 d2/kernel_0_grad histo (2.0, 6.015, 6.015, 12.0299, 3)
step 0 d2/bias_0_grad histo (1.0, 3.3224, 3.3224, 3.3224, 3)
step 0 d2_out histo (4.0, 1.085, 3.548, 8.9086, 8)
step 1 d1/kernel_0 histo (6.0, 0.9234, 0.9414, 5.5782, 3)
step 1 d1/bias_0 histo (2.0, -0.1062, -0.1062, -0.2123, 3)
step 1 d1/kernel_0_grad histo (6.0, 1.9325, 2.5553, 13.5342, 6)
step 1 d1/bias_0_grad histo (2.0, 3.3879, 3.3879, 6.7758, 3)
step 1 d1_out histo (8.0, 1.3497, 2.0199, 13.5822, 7)
step 1 d2/kernel_0 histo (2.0, 0.784, 0.784, 1.568, 3)
step 1 d2/bias_0 histo (1.0, -0.1121, -0.1121, -0.1121, 3)
step 1 d2/kernel_0_grad histo (2.0, 7.5587, 7.5587, 15.1174, 3)
step 1 d2/bias_0_grad histo (1.0, 4.3213, 4.3213, 4.3213, 3)
step 1 d2_out histo (4.0, 2.0042, 3.0551, 10.2003, 7)
step 0 epoch_loss simple_value 8.98206
step 0 epoch_mean_absolute_error simple_value 2.80144
step 0 epoch_val_loss simple_value 4.33075
step 0 epoch_val_mean_absolute_error simple_value 1.91092
step 1 epoch_loss simple_value 3.66743
step 1 epoch_mean_absolute_error simple_value 1.73722
step 1 epoch_val_loss simple_value 2.17493
step 1 epoch_val_mean_absolute_error simple_value 1.29704
"""


def _fit(log_dir, validate=True, shuffle=False, **kwargs):
    np.random.seed(0)
    x = np.random.rand(8, 3).astype("float32")
    y = np.random.rand(8, 1).astype("float32")
    model = K.Sequential(
        [
            K.layers.Dense(2, input_shape=(3,), kernel_initializer="ones", name="d1"),
            K.layers.Dense(1, kernel_initializer="ones", name="d2"),
        ]
    )
    model.compile("sgd", "mse", metrics=["mae"])
    board = K.callbacks.TensorBoard(str(log_dir), profile_batch=0, **kwargs)
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=2,
        verbose=0,
        callbacks=[board],
        validation_data=(x, y) if validate else None,
        shuffle=shuffle,
    )


def _describe(value) -> str:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return f"{value.tag} {kind} {round(value.simple_value, 5)}"
    if kind == "histo":
        h = value.histo
        shown = (h.num, round(h.min, 4), round(h.max, 4), round(h.sum, 4), len(h.bucket))
        return f"{value.tag} {kind} {shown}"
    if kind == "image":
        shown = (value.image.height, value.image.width, value.image.colorspace)
        return f"{value.tag} {kind} {shown}"
    return f"{value.tag} {kind}"


def _events(log_dir) -> str:
    files = [f for f in glob.glob(os.path.join(str(log_dir), "**"), recursive=True)]
    files = [f for f in files if os.path.isfile(f)]
    # One event file straight in log_dir: v1 graph mode has no train/ or validation/.
    assert [os.path.basename(f).split(".")[:2] for f in files] == [["events", "out"]]
    assert os.path.dirname(files[0]) == str(log_dir)
    lines = []
    for event in tf.train.summary_iterator(files[0]):
        kind = event.WhichOneof("what")
        if kind == "summary":
            lines += [f"step {event.step} {_describe(v)}" for v in event.summary.value]
        elif kind == "file_version":
            lines.append(f"step {event.step} file_version {event.file_version}")
        else:
            lines.append(f"step {event.step} {kind}")
    return "\n".join(lines) + "\n"


def test_histograms_images_and_sample_counted_batches(tmp_path):
    # shuffle=True: TF's training order and its shuffled validation batches both draw
    # from np.random, so the histograms of each validation batch must agree too.
    _fit(tmp_path, shuffle=True, histogram_freq=1, update_freq=3, write_images=True)
    assert _events(tmp_path) == HIST


def test_batch_scalars_without_graph_or_validation(tmp_path):
    _fit(tmp_path, validate=False, write_graph=False, update_freq=5)
    assert _events(tmp_path) == BATCH_NO_VAL


def test_gradient_histograms_every_other_epoch(tmp_path):
    _fit(tmp_path, histogram_freq=2, write_grads=True, write_graph=False)
    assert _events(tmp_path) == GRADS


def test_graph_and_meta_graph_round_trip(tmp_path):
    _fit(tmp_path, validate=False)
    (path,) = glob.glob(os.path.join(str(tmp_path), "events*"))
    events = list(tf.train.summary_iterator(path))
    graph_def = tf.GraphDef.FromString(events[1].graph_def)
    names = {n.name for n in graph_def.node}
    assert {"d1/kernel", "d1/bias", "d2/kernel", "d2/bias"} <= names
    meta = tf.MetaGraphDef.FromString(events[2].meta_graph_def)
    assert {n.name for n in meta.graph_def.node} == names


def test_embeddings_freq_without_data_raises_at_epoch_end(tmp_path):
    with pytest.raises(ValueError, match="embeddings_data must be provided"):
        _fit(tmp_path, validate=False, embeddings_freq=1)


def _small_fit(callbacks):
    x = np.random.RandomState(0).rand(8, 3).astype("float32")
    y = np.random.RandomState(1).rand(8, 1).astype("float32")
    model = K.Sequential([K.layers.Dense(1, input_shape=(3,), kernel_initializer="ones")])
    model.compile("sgd", "mse", metrics=["mae"])
    model.fit(x, y, batch_size=3, epochs=2, verbose=0, callbacks=callbacks, shuffle=False)


def test_base_logger_averages_loss_and_keeps_stateful_metrics():
    seen = []
    logger = K.callbacks.BaseLogger()
    later = K.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(dict(logs)))
    _small_fit([logger, later])
    # TF 2.21: fit makes every metric but the loss stateful (last batch value).
    assert logger.stateful_metrics == ["mean_absolute_error"]
    expected = [
        {"loss": 2.5233897417783737, "mean_absolute_error": 1.4998230934143066},
        {"loss": 1.9315195828676224, "mean_absolute_error": 1.2976256608963013},
    ]
    assert [sorted(s) for s in seen] == [sorted(e) for e in expected]
    for got, want in zip(seen, expected, strict=True):
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-6)
    # batch and size are totalled like any log (TF's totals hold 7 and 22 here).
    assert logger.seen == 8
    assert logger.totals["batch"] == 7 and logger.totals["size"] == 22
    assert logger.totals["loss"] == pytest.approx(15.452156662940979, rel=1e-6)
    assert K.callbacks.BaseLogger(stateful_metrics=["acc"]).stateful_metrics == {"acc"}


def test_remote_monitor_posts_each_epoch(monkeypatch):
    requests = pytest.importorskip("requests")
    posts = []
    monkeypatch.setattr(requests, "post", lambda url, *a, **kw: posts.append((url, a, kw)))
    monitor = K.callbacks.RemoteMonitor(root="http://example.invalid", path="/p")
    assert (monitor.root, monitor.field, monitor.headers, monitor.send_as_json) == (
        "http://example.invalid",
        "data",
        None,
        False,
    )
    _small_fit([monitor, K.callbacks.RemoteMonitor(root="http://h", send_as_json=True)])
    form = [p for p in posts if p[0] == "http://example.invalid/p"]
    as_json = [p for p in posts if p[0] == "http://h/publish/epoch/end/"]
    assert len(form) == 2 and len(as_json) == 2
    sent = json.loads(form[1][1][0]["data"])
    assert sorted(sent) == ["epoch", "loss", "mean_absolute_error"] and sent["epoch"] == 1
    assert as_json[0][2]["json"]["epoch"] == 0 and as_json[0][2]["headers"] is None


def test_remote_monitor_unreachable_server_only_warns(monkeypatch, caplog):
    requests = pytest.importorskip("requests")

    def refuse(*args, **kwargs):
        raise requests.exceptions.ConnectionError("refused")

    monkeypatch.setattr(requests, "post", refuse)
    _small_fit([K.callbacks.RemoteMonitor(root="http://127.0.0.1:9")])
    assert "could not reach RemoteMonitor root server at http://127.0.0.1:9" in caplog.text


def test_remote_monitor_without_requests_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "requests", None)
    with pytest.raises(ImportError, match="RemoteMonitor requires the `requests` library"):
        K.callbacks.RemoteMonitor().on_epoch_end(0, {})
