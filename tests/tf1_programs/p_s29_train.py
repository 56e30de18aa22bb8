"""Training-loop shaped TF1 programs (session 29): ExponentialMovingAverage with a Saver
that restores the averages, streaming tf.metrics with local variables, tf.losses with
weights, label smoothing and regularization losses, learning-rate schedules with a
global step, MonitoredTrainingSession checkpoints resumed, Saver bookkeeping, a siamese
net sharing variables, summaries read back, and gradient tricks (stop_gradient,
gradient_override_map, aggregation of clipped gradients)."""

import os
import tempfile

import numpy as np

from tf1_programs._common import error_class


def s29_ema_saver_restore_averages(tf):
    """The cifar10_eval pattern: train with an EMA of the weights applied after each
    step, save, then restore into a fresh graph through ema.variables_to_restore()."""
    d = tempfile.mkdtemp()
    xs = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(8, 1)
    ys = 3.0 * xs - 1.0
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        w = tf.Variable([[0.5]], name="w")
        b = tf.Variable([0.0], name="b")
        loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) + b - ys))
        opt = tf.train.GradientDescentOptimizer(0.2).minimize(loss, global_step=gs)
        ema = tf.train.ExponentialMovingAverage(0.9, num_updates=gs)
        with tf.control_dependencies([opt]):
            train = ema.apply(tf.trainable_variables())
        avg_name = ema.average_name(w)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(5):
                sess.run(train)
            live = sess.run([w, b])
            shadow = sess.run([ema.average(w), ema.average(b)])
            path = saver.save(sess, os.path.join(d, "model.ckpt"), global_step=gs)
    with tf.Graph().as_default():
        w2 = tf.Variable([[0.0]], name="w")
        b2 = tf.Variable([0.0], name="b")
        ema2 = tf.train.ExponentialMovingAverage(0.9)
        to_restore = ema2.variables_to_restore()
        restorer = tf.train.Saver(to_restore)
        with tf.Session() as sess:
            restorer.restore(sess, tf.train.latest_checkpoint(d))
            restored = sess.run([w2, b2])
    return {
        "live": live,
        "shadow": shadow,
        "restored": restored,
        "avg_name": avg_name,
        "restore_keys": sorted(to_restore),
        "ckpt": os.path.basename(path),
    }


def s29_streaming_metrics(tf):
    """tf.metrics accuracy / auc / mean_iou / precision / recall / mean over three
    batches fed through placeholders; update ops then value tensors; a reset through
    local_variables_initializer; the metric variables' names."""
    rng = np.random.RandomState(5)
    labels = tf.placeholder(tf.int64, [None])
    preds = tf.placeholder(tf.int64, [None])
    scores = tf.placeholder(tf.float32, [None])
    acc, acc_up = tf.metrics.accuracy(labels, preds)
    auc, auc_up = tf.metrics.auc(labels, scores, num_thresholds=20)
    iou, iou_up = tf.metrics.mean_iou(labels, preds, num_classes=2)
    prec, prec_up = tf.metrics.precision(labels, preds)
    rec, rec_up = tf.metrics.recall(labels, preds)
    mean, mean_up = tf.metrics.mean(scores, weights=tf.cast(labels, tf.float32) + 1.0)
    ups = [acc_up, auc_up, iou_up, prec_up, rec_up, mean_up]
    vals = [acc, auc, iou, prec, rec, mean]
    per_batch = []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for _ in range(3):
            lab = rng.randint(0, 2, 6)
            sc = np.clip(lab * 0.4 + rng.rand(6) * 0.6, 0.0, 1.0).astype(np.float32)
            pr = (sc > 0.5).astype(np.int64)
            per_batch.append(sess.run(ups, {labels: lab, preds: pr, scores: sc}))
        final = sess.run(vals)
        sess.run(tf.local_variables_initializer())
        reset = sess.run(acc_up, {labels: [1, 0], preds: [1, 1]})
    return {
        "per_batch": per_batch,
        "final": final,
        "reset": reset,
        "locals": sorted(v.op.name for v in tf.local_variables()),
        "metric_vars": len(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)),
    }


def s29_losses_collection(tf):
    """tf.losses: sparse_softmax_cross_entropy with per-example weights, softmax xent
    with label_smoothing, sigmoid xent, huber, a get_variable l2 regularizer,
    get_total_loss / get_regularization_loss and the Reduction modes."""
    logits = tf.constant([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3], [-1.0, 3.0, 0.0]])
    labels = tf.constant([0, 2, 1])
    w = tf.get_variable(
        "w",
        initializer=tf.constant([[0.5, -1.0], [2.0, 0.25]]),
        regularizer=lambda t: 0.1 * tf.nn.l2_loss(t),
    )
    sparse = tf.losses.sparse_softmax_cross_entropy(labels, logits, weights=[1.0, 0.5, 2.0])
    onehot = tf.one_hot(labels, 3)
    smooth = tf.losses.softmax_cross_entropy(onehot, logits, label_smoothing=0.2)
    sig = tf.losses.sigmoid_cross_entropy(tf.cast(onehot, tf.int32), logits, label_smoothing=0.1)
    huber = tf.losses.huber_loss(onehot, logits, delta=0.5)
    none = tf.losses.sparse_softmax_cross_entropy(
        labels, logits, reduction=tf.losses.Reduction.NONE, loss_collection=None
    )
    by_nonzero = tf.losses.absolute_difference(
        onehot,
        logits,
        weights=[[1.0], [0.0], [1.0]],
        reduction=tf.losses.Reduction.SUM_BY_NONZERO_WEIGHTS,
    )
    total = tf.losses.get_total_loss()
    reg = tf.losses.get_regularization_loss()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = sess.run([sparse, smooth, sig, huber, none, by_nonzero, total, reg])
    return {
        "values": values,
        "losses": [t.name for t in tf.losses.get_losses()],
        "reg": [t.name for t in tf.losses.get_regularization_losses()],
        "total_name": total.name,
        "w": w.op.name,
    }


def s29_lr_schedules(tf):
    """Learning-rate schedules driven by the global step: exponential_decay (staircase),
    piecewise_constant, polynomial_decay, inverse_time_decay, cosine_decay, and a
    MomentumOptimizer whose rate is the decayed tensor."""
    gs = tf.train.get_or_create_global_step()
    lrs = [
        tf.train.exponential_decay(0.1, gs, 3, 0.5, staircase=True),
        tf.train.exponential_decay(0.1, gs, 3, 0.5),
        tf.train.piecewise_constant(gs, [2, 4], [1.0, 0.5, 0.1]),
        tf.train.polynomial_decay(0.1, gs, 5, 0.01, power=2.0),
        tf.train.inverse_time_decay(0.1, gs, 2, 0.5),
        tf.train.cosine_decay(0.1, gs, 6),
        tf.train.natural_exp_decay(0.1, gs, 2, 0.3, staircase=True),
    ]
    v = tf.Variable([1.0, -2.0])
    loss = tf.reduce_sum(tf.square(v))
    train = tf.train.MomentumOptimizer(lrs[0], 0.5, use_nesterov=True).minimize(
        loss, global_step=gs
    )
    rows = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(6):
            rows.append(sess.run(lrs))
            sess.run(train)
        final = sess.run([v, gs])
    return {"rows": rows, "final": final, "names": [t.op.name for t in lrs]}


def s29_monitored_session_resume(tf):
    """MonitoredTrainingSession with checkpoint_dir and StopAtStepHook: a first run to
    step 3 writes a checkpoint; a second session over the same directory resumes from
    it and stops at step 5; the checkpoint state lists both."""
    d = tempfile.mkdtemp()
    results = []
    for last in (3, 5):
        with tf.Graph().as_default():
            gs = tf.train.get_or_create_global_step()
            w = tf.get_variable("w", initializer=tf.constant([2.0, -1.0]))
            loss = tf.reduce_sum(tf.square(w - 1.0))
            train = tf.train.AdagradOptimizer(0.3).minimize(loss, global_step=gs)
            hooks = [tf.train.StopAtStepHook(last_step=last)]
            seen = []
            with tf.train.MonitoredTrainingSession(
                checkpoint_dir=d,
                hooks=hooks,
                save_checkpoint_secs=None,
                save_checkpoint_steps=1000,
                save_summaries_steps=None,
                save_summaries_secs=None,
                log_step_count_steps=None,
            ) as sess:
                while not sess.should_stop():
                    _, step, value = sess.run([train, gs, loss])
                    seen.append((int(step), value))
            results.append(seen)
    state = tf.train.get_checkpoint_state(d)
    reader = tf.train.NewCheckpointReader(tf.train.latest_checkpoint(d))
    return {
        "runs": results,
        "latest": os.path.basename(state.model_checkpoint_path),
        "all": [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        "vars": sorted(reader.get_variable_to_shape_map()),
        "w": reader.get_tensor("w"),
        "accum": reader.get_tensor("w/Adagrad"),
    }


def s29_saver_bookkeeping(tf):
    """Saver(max_to_keep=2) over several steps, a var_list dict renaming, restore of a
    subset, list_variables / load_variable on the checkpoint, and a missing key's error."""
    d = tempfile.mkdtemp()
    prefix = os.path.join(d, "ckpt")
    with tf.Graph().as_default():
        a = tf.Variable([1.0, 2.0], name="a")
        b = tf.Variable(3, name="b")
        inc = tf.group(tf.assign_add(a, [0.5, 0.5]), tf.assign_add(b, 1))
        saver = tf.train.Saver(max_to_keep=2)
        renamed = tf.train.Saver({"renamed_a": a})
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            paths = []
            for step in range(3):
                sess.run(inc)
                paths.append(saver.save(sess, prefix, global_step=step))
            renamed.save(sess, os.path.join(d, "renamed"))
            kept = [os.path.basename(p) for p in saver.last_checkpoints]
    with tf.Graph().as_default():
        a2 = tf.Variable([0.0, 0.0], name="a")
        b2 = tf.Variable(0, name="b")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.train.Saver([a2]).restore(sess, paths[1])
            partial = sess.run([a2, b2])
            tf.train.Saver({"renamed_a": a2}).restore(sess, os.path.join(d, "renamed"))
            from_renamed = sess.run(a2)
            try:
                tf.train.Saver({"nope": a2}).restore(sess, paths[2])
                missing = None
            except Exception as exc:  # noqa: BLE001 - the class name is the result
                missing = type(exc).__name__
    listed = tf.train.list_variables(paths[2])
    return {
        "kept": kept,
        "exists0": tf.train.checkpoint_exists(paths[0]),
        "partial": partial,
        "from_renamed": from_renamed,
        "missing": missing,
        "listed": [[n, list(s)] for n, s in listed],
        "b_loaded": tf.train.load_variable(paths[2], "b"),
    }


def s29_siamese_shared_variables(tf):
    """A siamese network: one tower built twice under variable_scope(reuse=AUTO_REUSE),
    a contrastive loss on the two embeddings, Adam; one set of variables is trained."""
    rng = np.random.RandomState(6)
    left = tf.constant(rng.rand(4, 3).astype(np.float32))
    right = tf.constant(rng.rand(4, 3).astype(np.float32))
    same = tf.constant([1.0, 0.0, 1.0, 0.0])

    def tower(x):
        with tf.variable_scope("tower", reuse=tf.AUTO_REUSE):
            w = tf.get_variable("w", initializer=tf.constant(rng.rand(3, 2).astype(np.float32)))
            b = tf.get_variable("b", [2], initializer=tf.zeros_initializer())
            return tf.nn.tanh(tf.matmul(x, w) + b)

    e1, e2 = tower(left), tower(right)
    dist = tf.sqrt(tf.reduce_sum(tf.square(e1 - e2), 1) + 1e-6)
    margin = 1.0
    loss = tf.reduce_mean(
        same * tf.square(dist) + (1 - same) * tf.square(tf.maximum(margin - dist, 0))
    )
    train = tf.train.AdamOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        losses = [sess.run([train, loss])[1] for _ in range(4)]
        dists = sess.run(dist)
    return {
        "losses": losses,
        "dists": dists,
        "trainable": [v.op.name for v in tf.trainable_variables()],
        "globals": len(tf.global_variables()),
        "e2_name": e2.name,
    }


def s29_summaries_read_back(tf):
    """tf.summary.scalar / histogram / merge_all into a FileWriter, read back with
    tf.train.summary_iterator: tags, steps and scalar values."""
    d = tempfile.mkdtemp()
    v = tf.Variable(1.0)
    step = tf.assign_add(v, 0.5)
    tf.summary.scalar("value", v)
    tf.summary.histogram("hist", tf.stack([v, v * 2.0, -v]))
    merged = tf.summary.merge_all()
    with tf.Session() as sess:
        writer = tf.summary.FileWriter(d, sess.graph)
        sess.run(tf.global_variables_initializer())
        for i in range(3):
            s = sess.run(merged)
            writer.add_summary(s, global_step=i)
            sess.run(step)
        writer.close()
    (name,) = [f for f in os.listdir(d) if f.startswith("events.out.tfevents")]
    rows, kinds = [], []
    for event in tf.train.summary_iterator(os.path.join(d, name)):
        kinds.append(event.WhichOneof("what"))
        for val in event.summary.value:
            if val.HasField("simple_value"):
                rows.append([event.step, val.tag, val.simple_value])
            else:
                rows.append([event.step, val.tag, val.histo.num, val.histo.sum, val.histo.min])
    return {"rows": rows, "kinds": kinds, "merged": merged.name}


def s29_gradient_tricks(tf):
    """stop_gradient, gradient_override_map (Identity as a straight-through estimator
    for tf.sign), compute_gradients / clip_by_value / apply_gradients, aggregation of
    gradients from two losses, and tf.gradients with grad_ys."""
    x = tf.Variable([0.3, -1.2, 2.0])
    g = tf.get_default_graph()
    with g.gradient_override_map({"Sign": "Identity"}):
        q = tf.sign(x)
    frozen = tf.stop_gradient(x * 2.0)
    loss = tf.reduce_sum(q * tf.constant([1.0, 2.0, 3.0])) + tf.reduce_sum(frozen * x)
    opt = tf.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(loss)
    clipped = [(tf.clip_by_value(gr, -1.5, 1.5), v) for gr, v in gvs]
    train = opt.apply_gradients(clipped)
    (gy,) = tf.gradients(tf.square(x), [x], grad_ys=tf.constant([1.0, 0.0, -1.0]))
    (agg,) = tf.gradients(
        [tf.reduce_sum(x * x), tf.reduce_sum(3.0 * x)],
        [x],
        aggregation_method=tf.AggregationMethod.EXPERIMENTAL_TREE,
    )
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        raw = sess.run([gr for gr, _ in gvs])
        sess.run(train)
        after = sess.run(x)
        rest = sess.run([gy, agg])
    return {"raw": raw, "after": after, "grad_ys": rest[0], "agg": rest[1]}


def s29_session_run_hooks(tf):
    """MonitoredSession hooks of a training script: a custom SessionRunHook asking for
    extra fetches in before_run and reading them in after_run, LoggingTensorHook every
    2 iterations, NanTensorHook, FinalOpsHook's final value, StopAtStepHook(num_steps)."""
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable([1.0, 2.0])
    loss = tf.reduce_sum(tf.square(w))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    seen = []

    class Recorder(tf.train.SessionRunHook):
        def begin(self):
            seen.append(["begin", len(tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES))])

        def after_create_session(self, session, coord):
            seen.append(["created", session.run(gs)])

        def before_run(self, run_context):
            return tf.train.SessionRunArgs({"w": w, "step": gs})

        def after_run(self, run_context, run_values):
            r = run_values.results
            seen.append(["after", int(r["step"]), r["w"]])
            if r["step"] >= 10:
                run_context.request_stop()

        def end(self, session):
            seen.append(["end", session.run(gs)])

    final = tf.train.FinalOpsHook(tf.identity(w * 10.0))
    hooks = [
        Recorder(),
        tf.train.LoggingTensorHook({"loss": loss}, every_n_iter=2),
        tf.train.NanTensorHook(loss),
        final,
        tf.train.StopAtStepHook(num_steps=3),
    ]
    results = []
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        while not sess.should_stop():
            results.append(sess.run([train, loss])[1])
    return {"seen": seen, "results": results, "final": final.final_ops_values}


def s29_optimizer_zoo(tf):
    """The remaining TF1 optimizers on one quadratic, three steps each, with their slot
    names: Adadelta, centered RMSProp with momentum, FTRL with l1/l2, ProximalAdagrad,
    ProximalGradientDescent, AdagradDA and Adam with a tensor learning rate."""
    gs = tf.train.get_or_create_global_step()
    target = tf.constant([0.5, -1.5, 2.0])
    opts = {
        "adadelta": tf.train.AdadeltaOptimizer(1.0, rho=0.9),
        "rmsprop": tf.train.RMSPropOptimizer(0.05, momentum=0.5, centered=True),
        "ftrl": tf.train.FtrlOptimizer(
            0.2, l1_regularization_strength=0.05, l2_regularization_strength=0.1
        ),
        "proximal_adagrad": tf.train.ProximalAdagradOptimizer(0.3, l1_regularization_strength=0.1),
        "proximal_sgd": tf.train.ProximalGradientDescentOptimizer(
            0.2, l1_regularization_strength=0.05
        ),
        "adagrad_da": tf.train.AdagradDAOptimizer(0.3, gs, l2_regularization_strength=0.01),
        "adam": tf.train.AdamOptimizer(tf.constant(0.1), epsilon=1e-4),
    }
    variables, steps = {}, []
    for name, opt in opts.items():
        with tf.variable_scope(name):
            v = tf.get_variable("v", initializer=tf.constant([1.0, 1.0, -1.0]))
        variables[name] = v
        loss = tf.reduce_sum(tf.square(v - target))
        steps.append(opt.minimize(loss))
    inc = tf.assign_add(gs, 1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(steps)
            sess.run(inc)
        values = sess.run(variables)
    slots = {name: sorted(opt.get_slot_names()) for name, opt in opts.items()}
    return {"values": values, "slots": slots}


def s29_losses_zoo(tf):
    """tf.losses not in the first batch: cosine_distance, hinge, log_loss, mean_pairwise
    squared error, compute_weighted_loss with broadcast weights, weighted and v2 softmax
    cross entropies with the gradient reaching the labels."""
    labels = tf.constant([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    preds = tf.constant([[0.2, 0.7, 0.9], [0.6, 0.3, 0.1]])
    unit = tf.nn.l2_normalize(preds, axis=1)
    unit_labels = tf.nn.l2_normalize(labels, axis=1)
    soft = tf.Variable([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]])
    logits = tf.constant([[1.0, -1.0, 0.5], [0.3, 0.2, -0.4]])
    xent_v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=soft, logits=logits)
    (label_grad,) = tf.gradients(tf.reduce_sum(xent_v2), [soft])
    values = [
        tf.losses.cosine_distance(unit_labels, unit, axis=1),
        tf.losses.hinge_loss(labels, preds - 0.5),
        tf.losses.log_loss(labels, preds, weights=[[1.0], [2.0]]),
        tf.losses.mean_pairwise_squared_error(labels, preds),
        tf.losses.compute_weighted_loss(tf.square(preds - labels), weights=[[1.0, 0.0, 2.0]]),
        tf.reduce_mean(tf.nn.weighted_cross_entropy_with_logits(labels, logits, 2.5)),
        xent_v2,
        label_grad,
    ]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(values)
    bad = error_class(
        lambda: tf.losses.compute_weighted_loss(tf.square(preds - labels), weights=[1.0, 0.0, 2.0])
    )
    return {"values": got, "names": [t.name for t in values[:6]], "rank_1_weights": bad}


def s29_metrics_at_k(tf):
    """Ranking metrics of a recommender: precision_at_k / recall_at_k over sparse
    labels, average_precision_at_k, mean_per_class_accuracy, and the thresholded
    false_negatives_at_thresholds / true_positives, streamed over two batches."""
    labels = tf.placeholder(tf.int64, [None, 1])
    preds = tf.placeholder(tf.float32, [None, 4])
    cls_labels = tf.placeholder(tf.int64, [None])
    cls_preds = tf.placeholder(tf.int64, [None])
    probs = tf.placeholder(tf.float32, [None])
    metrics = [
        tf.metrics.precision_at_k(labels, preds, k=2),
        tf.metrics.recall_at_k(labels, preds, k=2),
        tf.metrics.average_precision_at_k(labels, preds, k=3),
        tf.metrics.mean_per_class_accuracy(cls_labels, cls_preds, num_classes=3),
        tf.metrics.false_negatives_at_thresholds(
            tf.cast(cls_labels > 0, tf.bool), probs, [0.3, 0.6]
        ),
        tf.metrics.true_positives(tf.cast(cls_labels > 0, tf.bool), probs > 0.5),
    ]
    # a class id past the predictions' classes is never relevant (TF cleans it to -1)
    oor_value, oor_update = tf.metrics.average_precision_at_k(
        tf.constant([[1, 7], [2, 0]], tf.int64),
        tf.constant([[0.1, 0.5, 0.2, 0.3], [0.9, 0.1, 0.4, 0.2]]),
        k=2,
    )
    rng = np.random.RandomState(31)
    ups = []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for _ in range(2):
            feed = {
                labels: rng.randint(0, 4, (3, 1)),
                preds: rng.rand(3, 4).astype(np.float32),
                cls_labels: rng.randint(0, 3, 3),
                cls_preds: rng.randint(0, 3, 3),
                probs: rng.rand(3).astype(np.float32),
            }
            ups.append(sess.run([m[1] for m in metrics], feed))
        final = sess.run([m[0] for m in metrics])
        oor = [sess.run(oor_update), sess.run(oor_value)]
    return {
        "ups": ups,
        "final": final,
        "names": [m[0].name for m in metrics],
        "out_of_range": oor,
        "ap_vars": sorted(v.op.name for v in tf.local_variables() if "average" in v.op.name),
    }


PROGRAMS = [
    s29_ema_saver_restore_averages,
    s29_streaming_metrics,
    s29_losses_collection,
    s29_lr_schedules,
    s29_monitored_session_resume,
    s29_saver_bookkeeping,
    s29_siamese_shared_variables,
    s29_summaries_read_back,
    s29_gradient_tricks,
    s29_session_run_hooks,
    s29_optimizer_zoo,
    s29_losses_zoo,
    s29_metrics_at_k,
]
