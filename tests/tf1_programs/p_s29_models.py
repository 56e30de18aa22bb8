"""Model-garden shaped TF1 programs (session 29): word2vec_basic, the PTB LSTM language
model, seq2seq with hand-written attention, batch normalization with UPDATE_OPS, a
convnet, a bidirectional tagger and a while_loop greedy decoder. Written from scratch
in the shape of those tutorials, tiny sizes; TF's own seeded initializers and samplers
are used on purpose (graph seed + op seeds) so the random streams are compared too.
"""

import numpy as np

_RNG = np.random.RandomState(29)
_CORPUS = _RNG.randint(0, 12, 60).astype(np.int32)


def s29_word2vec_basic(tf):
    """word2vec_basic: skip-gram batches, embedding_lookup, nce_loss with a seeded
    log-uniform candidate sampler, SGD, normalized embeddings and cosine similarity."""
    tf.set_random_seed(7)
    vocab, dim, batch, num_sampled = 12, 4, 8, 3
    train_inputs = tf.placeholder(tf.int32, shape=[batch])
    train_labels = tf.placeholder(tf.int32, shape=[batch, 1])
    valid = tf.constant([1, 3], dtype=tf.int32)
    embeddings = tf.Variable(tf.random_uniform([vocab, dim], -1.0, 1.0, seed=1))
    embed = tf.nn.embedding_lookup(embeddings, train_inputs)
    nce_weights = tf.Variable(tf.random_uniform([vocab, dim], -0.5, 0.5, seed=2))
    nce_biases = tf.Variable(tf.zeros([vocab]))
    sampled = tf.nn.log_uniform_candidate_sampler(
        tf.cast(train_labels, tf.int64), 1, num_sampled, True, vocab, seed=3
    )
    loss = tf.reduce_mean(
        tf.nn.nce_loss(
            weights=nce_weights,
            biases=nce_biases,
            labels=train_labels,
            inputs=embed,
            num_sampled=num_sampled,
            num_classes=vocab,
            sampled_values=sampled,
        )
    )
    optimizer = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    norm = tf.sqrt(tf.reduce_sum(tf.square(embeddings), 1, keepdims=True))
    normalized = embeddings / norm
    valid_embeddings = tf.nn.embedding_lookup(normalized, valid)
    similarity = tf.matmul(valid_embeddings, normalized, transpose_b=True)
    losses = []
    with tf.Session() as sess:
        tf.global_variables_initializer().run()
        for step in range(4):
            centre = _CORPUS[step * batch + 1 : step * batch + 1 + batch]
            context = _CORPUS[step * batch : step * batch + batch].reshape(batch, 1)
            _, value = sess.run([optimizer, loss], {train_inputs: centre, train_labels: context})
            losses.append(value)
        sim = similarity.eval()
        final = normalized.eval()
    return {
        "losses": losses,
        "similarity": sim,
        "nearest": (-sim[:, :]).argsort(axis=1)[:, 1:4],
        "normalized": final,
        "embed_shape": str(embed.shape),
    }


def s29_ptb_lstm_lm(tf):
    """The PTB model: MultiRNNCell of LSTMCells in DropoutWrappers (keep_prob 1),
    static_rnn over unstacked inputs, sparse softmax loss per word, clip_by_global_norm,
    a learning-rate variable assigned between epochs, and the state feed/fetch loop."""
    batch, steps, hidden, vocab, layers = 2, 3, 4, 10, 2
    data = _CORPUS[: 2 * batch * steps + batch].astype(np.int32)
    init = tf.random_uniform_initializer(-0.1, 0.1, seed=11)
    with tf.variable_scope("Model", initializer=init):
        x = tf.placeholder(tf.int32, [batch, steps])
        y = tf.placeholder(tf.int32, [batch, steps])
        embedding = tf.get_variable("embedding", [vocab, hidden], dtype=tf.float32)
        inputs = tf.nn.embedding_lookup(embedding, x)

        def make_cell():
            cell = tf.nn.rnn_cell.LSTMCell(hidden, forget_bias=0.0, state_is_tuple=True)
            return tf.nn.rnn_cell.DropoutWrapper(cell, output_keep_prob=1.0)

        cell = tf.nn.rnn_cell.MultiRNNCell([make_cell() for _ in range(layers)])
        initial_state = cell.zero_state(batch, tf.float32)
        outputs, state = tf.nn.static_rnn(
            cell, tf.unstack(inputs, num=steps, axis=1), initial_state=initial_state
        )
        output = tf.reshape(tf.concat(outputs, 1), [-1, hidden])
        softmax_w = tf.get_variable("softmax_w", [hidden, vocab])
        softmax_b = tf.get_variable("softmax_b", [vocab])
        logits = tf.reshape(tf.nn.xw_plus_b(output, softmax_w, softmax_b), [batch, steps, vocab])
        per_word = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        cost = tf.reduce_sum(tf.reduce_mean(per_word, 0))
        lr = tf.Variable(0.0, trainable=False)
        tvars = tf.trainable_variables()
        grads, global_norm = tf.clip_by_global_norm(tf.gradients(cost, tvars), 5.0)
        train_op = tf.train.GradientDescentOptimizer(lr).apply_gradients(
            zip(grads, tvars), global_step=tf.train.get_or_create_global_step()
        )
        new_lr = tf.placeholder(tf.float32, shape=[])
        lr_update = tf.assign(lr, new_lr)
    perplexities = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(2):
            sess.run(lr_update, {new_lr: 1.0 * 0.5**epoch})
            state_val = sess.run(initial_state)
            costs, iters = 0.0, 0
            for i in range(2):
                xs = data[i * steps : i * steps + batch * steps].reshape(batch, steps)
                ys = data[i * steps + 1 : i * steps + 1 + batch * steps].reshape(batch, steps)
                feed = {x: xs, y: ys}
                for j, (c, h) in enumerate(initial_state):
                    feed[c] = state_val[j].c
                    feed[h] = state_val[j].h
                c_val, state_val, norm_val, _ = sess.run(
                    [cost, state, global_norm, train_op], feed
                )
                costs += c_val
                iters += steps
            perplexities.append(np.exp(costs / iters))
        names = [v.op.name for v in tvars]
        last_h = state_val[-1].h
        step = sess.run(tf.train.get_global_step())
    return {
        "perplexities": perplexities,
        "norm": norm_val,
        "names": names,
        "last_h": last_h,
        "global_step": step,
        "state_len": len(state),
    }


def s29_seq2seq_attention(tf):
    """Encoder dynamic_rnn (GRUCell), a decoder unrolled by hand with Luong dot attention
    masked by sequence_mask (the source lengths), teacher forcing, SGD."""
    tf.set_random_seed(5)
    batch, src_len, tgt_len, vocab, units = 2, 3, 2, 6, 4
    src = tf.constant(_CORPUS[:6].reshape(batch, src_len) % vocab)
    src_lens = tf.constant([3, 2])
    tgt_in = tf.constant(_CORPUS[8:12].reshape(batch, tgt_len) % vocab)
    tgt_out = tf.constant(_CORPUS[9:13].reshape(batch, tgt_len) % vocab)
    emb = tf.get_variable("emb", [vocab, units], initializer=tf.glorot_uniform_initializer(seed=1))
    with tf.variable_scope("encoder"):
        enc_cell = tf.nn.rnn_cell.GRUCell(
            units, kernel_initializer=tf.glorot_uniform_initializer(seed=2)
        )
        enc_out, enc_state = tf.nn.dynamic_rnn(
            enc_cell, tf.nn.embedding_lookup(emb, src), dtype=tf.float32
        )
    mask = tf.sequence_mask(src_lens, src_len, dtype=tf.float32)
    with tf.variable_scope("decoder") as scope:
        dec_cell = tf.nn.rnn_cell.GRUCell(units)
        w_out = tf.get_variable("w_out", [2 * units, vocab])
        state = enc_state
        logits_list, alignments = [], []
        dec_in = tf.nn.embedding_lookup(emb, tgt_in)
        for t in range(tgt_len):
            if t > 0:
                scope.reuse_variables()
            out, state = dec_cell(dec_in[:, t, :], state)
            score = tf.squeeze(tf.matmul(enc_out, tf.expand_dims(out, 2)), 2)
            score = score * mask + (1.0 - mask) * -1e9
            align = tf.nn.softmax(score)
            context = tf.reduce_sum(enc_out * tf.expand_dims(align, 2), 1)
            logits_list.append(tf.matmul(tf.concat([out, context], 1), w_out))
            alignments.append(align)
    logits = tf.stack(logits_list, 1)
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tgt_out, logits=logits)
    )
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first_align, enc_state_val, preds = sess.run(
            [alignments[0], enc_state, tf.argmax(logits, -1)]
        )
        losses = [sess.run([train, loss])[1] for _ in range(3)]
    return {
        "losses": losses,
        "first_align": first_align,
        "preds": preds,
        "enc_state": enc_state_val,
        "enc_out_shape": str(enc_out.shape),
        "var_names": sorted(v.op.name for v in tf.trainable_variables()),
    }


def s29_batch_norm_update_ops(tf):
    """tf.layers.batch_normalization with training placeholder: UPDATE_OPS under
    control_dependencies around minimize, moving statistics after steps, then inference."""
    rng = np.random.RandomState(1)
    x_val = (rng.rand(6, 3) * 4.0 - 1.0).astype(np.float32)
    y_val = (rng.rand(6, 1)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 1])
    training = tf.placeholder(tf.bool, [])
    h = tf.layers.dense(x, 4, kernel_initializer=tf.constant_initializer(0.3), name="fc1")
    h = tf.layers.batch_normalization(h, training=training, momentum=0.9, name="bn1")
    h = tf.nn.relu(h)
    out = tf.layers.dense(h, 1, kernel_initializer=tf.constant_initializer(-0.2), name="fc2")
    loss = tf.losses.mean_squared_error(y, out)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        losses = [
            sess.run([train, loss], {x: x_val, y: y_val, training: True})[1] for _ in range(3)
        ]
        mm, mv, gamma = sess.run(["bn1/moving_mean:0", "bn1/moving_variance:0", "bn1/gamma:0"])
        infer = sess.run(out, {x: x_val[:2], training: False})
    return {
        "losses": losses,
        "moving_mean": mm,
        "moving_variance": mv,
        "gamma": gamma,
        "infer": infer,
        "update_ops": sorted(op.name for op in update_ops),
        "globals": sorted(v.op.name for v in tf.global_variables()),
    }


def s29_convnet_layers(tf):
    """The layers tutorial's CNN: conv2d / max_pooling2d / flatten / dense / dropout
    (training False) with seeded glorot kernels, sparse softmax loss, Momentum."""
    rng = np.random.RandomState(2)
    tf.set_random_seed(3)
    images = (rng.rand(4, 6, 6, 1)).astype(np.float32)
    labels = np.array([0, 2, 1, 2], np.int32)
    x = tf.placeholder(tf.float32, [None, 6, 6, 1])
    conv = tf.layers.conv2d(x, 3, [3, 3], padding="same", activation=tf.nn.relu, name="conv1")
    pool = tf.layers.max_pooling2d(conv, [2, 2], 2)
    flat = tf.layers.flatten(pool)
    dense = tf.layers.dense(flat, 5, activation=tf.nn.relu)
    drop = tf.layers.dropout(dense, rate=0.4, training=False)
    logits = tf.layers.dense(drop, 3)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    gs = tf.train.get_or_create_global_step()
    train = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss, global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kernel0 = sess.run("conv1/kernel:0")
        losses = [sess.run([train, loss], {x: images})[1] for _ in range(3)]
        probs = sess.run(tf.nn.softmax(logits), {x: images})
        step = sess.run(gs)
    return {
        "kernel0": kernel0,
        "losses": losses,
        "probs": probs,
        "step": step,
        "shapes": [str(t.shape) for t in (conv, pool, flat, dense, logits)],
        "names": [t.name for t in (conv, pool, flat, dense, logits)],
        "losses_coll": [t.name for t in tf.get_collection(tf.GraphKeys.LOSSES)],
    }


def s29_bidirectional_tagger(tf):
    """A sequence tagger's forward pass: bidirectional_dynamic_rnn of LSTMCells with
    sequence_length, concatenated outputs, masked per-token loss with tf.sequence_mask
    weights (training through a dynamic_rnn is s29_seq2seq_attention's)."""
    rng = np.random.RandomState(3)
    tf.set_random_seed(9)
    batch, length, dim, tags = 2, 3, 3, 3
    inputs = tf.constant(rng.rand(batch, length, dim).astype(np.float32))
    lens = tf.constant([3, 1])
    target = tf.constant(np.array([[0, 1, 2], [2, 0, 0]], np.int32))
    fw = tf.nn.rnn_cell.LSTMCell(3, initializer=tf.glorot_uniform_initializer(seed=4))
    bw = tf.nn.rnn_cell.LSTMCell(3, initializer=tf.random_uniform_initializer(-0.3, 0.3, seed=5))
    (out_fw, out_bw), (st_fw, st_bw) = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, inputs, sequence_length=lens, dtype=tf.float32
    )
    out = tf.concat([out_fw, out_bw], -1)
    logits = tf.layers.dense(out, tags, kernel_initializer=tf.glorot_uniform_initializer(seed=6))
    weights = tf.sequence_mask(lens, length, dtype=tf.float32)
    loss = tf.losses.sparse_softmax_cross_entropy(target, logits, weights=weights)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = sess.run([out_bw, st_fw.h, st_bw.c, loss])
    return {
        "out_bw": values[0],
        "st_fw_h": values[1],
        "st_bw_c": values[2],
        "loss": values[3],
        "out_shape": str(out.shape),
        "vars": [v.op.name for v in tf.global_variables()],
    }


def s29_greedy_decoder_while_loop(tf):
    """Inference-time greedy decoding: a GRUCell stepped inside tf.while_loop with a
    TensorArray, argmax feedback through embedding_lookup, early stop on an end token."""
    rng = np.random.RandomState(4)
    vocab, units, batch = 5, 4, 2
    emb = tf.constant(rng.rand(vocab, units).astype(np.float32))
    w = tf.constant((rng.rand(units, vocab) - 0.5).astype(np.float32))
    cell = tf.nn.rnn_cell.GRUCell(units, kernel_initializer=tf.constant_initializer(0.25))
    start = tf.fill([batch], 1)

    def cond(t, tok, state, ta, done):
        return tf.logical_and(t < 6, tf.logical_not(tf.reduce_all(done)))

    def body(t, tok, state, ta, done):
        out, state = cell(tf.nn.embedding_lookup(emb, tok), state)
        nxt = tf.cast(tf.argmax(tf.matmul(out, w), 1), tf.int32)
        nxt = tf.where(done, tf.zeros_like(nxt), nxt)
        return t + 1, nxt, state, ta.write(t, nxt), tf.logical_or(done, tf.equal(nxt, 0))

    ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
    init_state = tf.constant((rng.rand(batch, units) - 0.5).astype(np.float32))
    t_f, _, state_f, ta_f, done_f = tf.while_loop(
        cond, body, [0, start, init_state, ta, tf.zeros([batch], tf.bool)]
    )
    decoded = tf.transpose(ta_f.stack())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        res = sess.run([t_f, decoded, state_f, done_f])
    return {"steps": res[0], "decoded": res[1], "state": res[2], "done": res[3]}


PROGRAMS = [
    s29_word2vec_basic,
    s29_ptb_lstm_lm,
    s29_seq2seq_attention,
    s29_batch_norm_update_ops,
    s29_convnet_layers,
    s29_bidirectional_tagger,
    s29_greedy_decoder_while_loop,
]
