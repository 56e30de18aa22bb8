"""Seq2seq-style decoding written as a TF1 program (while_loop with TensorArrays and
maximum_iterations, CTC decoders, gather_nd attention, sparse embedding gradients),
checked against TF 2.21: values, names and the errors TF raises on loop structures.
Values recorded from TF 2.21 (tf.compat.v1)."""

import numpy as np
import pytest

import asyncflow as tf


@pytest.mark.parametrize(
    "body,loop_vars,max_iter,error",
    [
        # TF compares loop_vars and the body's result as lists: the outer sequence type may
        # differ, a nested one may not, and maximum_iterations nests the user's vars
        (lambda i, p: [i + 1, [p[0], p[1]]], [0, (1.0, 2.0)], None, TypeError),
        (lambda i, p: (i + 1, p), [0, 1.0], None, None),
        (lambda i, p: (i + 1, p), [0, 1.0], 2, TypeError),
        (lambda i, p: [i + 1, p], (0, 1.0), 2, TypeError),
        (lambda i, p: [i + 1, p], [0, 1.0], 2, None),
        (lambda i, p: (i + 1, p, p), (0, 1.0), None, ValueError),
    ],
)
def test_while_loop_structure_checks_match_tf(body, loop_vars, max_iter, error):
    with tf.Graph().as_default():
        cond = lambda i, p: i < 3  # noqa: E731
        if error is None:
            tf.while_loop(cond, body, loop_vars, maximum_iterations=max_iter)
        else:
            with pytest.raises(error, match="don't have the same nested structure"):
                tf.while_loop(cond, body, loop_vars, maximum_iterations=max_iter)


def test_tensor_array_loop_with_maximum_iterations():
    with tf.Graph().as_default():
        ta0 = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[3])

        def body(i, acc, ta):
            acc = acc * 0.5 + tf.cast(i, tf.float32)
            return [i + 1, acc, ta.write(i, acc)]

        i_f, acc_f, ta_f = tf.while_loop(
            lambda i, a, t: i < 100, body, [0, tf.ones([3]), ta0], maximum_iterations=6
        )
        stacked = ta_f.stack()
        assert (i_f.name, acc_f.name) == ("while/Exit_1:0", "while/Exit_2:0")
        assert stacked.shape.as_list() == [None, 3]
        with tf.Session() as s:
            i, st = s.run([i_f, stacked])
    assert i == 6
    np.testing.assert_allclose(st[:, 0], [0.5, 1.25, 2.625, 4.3125, 6.15625, 8.078125])


def test_ctc_decoders_and_gather_scatter_attention_match_tf():
    rng = np.random.RandomState(0)
    rng.randn(3, 5, 4)  # the encoder input the recorded program drew first
    with tf.Graph().as_default():
        lens = tf.constant([5, 3, 1])
        logits = tf.constant(rng.randn(5, 3, 7).astype(np.float32))
        (gd,), gp = tf.nn.ctc_greedy_decoder(logits, lens)
        bd, bp = tf.nn.ctc_beam_search_decoder(logits, lens, beam_width=4, top_paths=2)
        dense = tf.sparse.to_dense(gd, default_value=-1)
        idx = tf.stack([tf.range(3), lens - 1], axis=1)
        sc = tf.scatter_nd(idx, tf.ones([3]), [3, 5])
        assert (gd.indices.name, gp.name) == ("CTCGreedyDecoder:0", "CTCGreedyDecoder:3")
        assert (bd[1].values.name, bp.name) == ("CTCBeamSearchDecoder:3", "CTCBeamSearchDecoder:6")
        with tf.Session() as s:
            r = s.run([dense, gp, bd[0].values, bd[1].values, bd[1].indices, bp, sc])
    assert r[0].tolist() == [[4, 3, 4, 0], [5, 3, 4, -1], [0, -1, -1, -1]]
    np.testing.assert_allclose(r[1][:, 0], [-8.24934, -4.27191, -0.40234], atol=1e-4)
    assert r[2].tolist() == [4, 3, 0, 5, 1, 0]
    assert r[3].tolist() == [4, 3, 4, 0, 5, 4, 5]
    assert r[4].tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [2, 0]]
    np.testing.assert_allclose(
        r[5], [[-3.75436, -3.75932], [-2.88061, -3.50346], [-1.22309, -1.56927]], atol=1e-4
    )
    assert r[6].tolist() == [[0, 0, 0, 0, 1], [0, 0, 1, 0, 0], [1, 0, 0, 0, 0]]


def test_summed_embedding_gradient_values_are_named_concat_as_in_tf():
    with tf.Graph().as_default():
        emb = tf.get_variable("emb", [7, 4])
        a = tf.nn.embedding_lookup(emb, [0, 2])
        b = tf.nn.embedding_lookup(emb, [2, 2])
        (g,) = tf.gradients(tf.reduce_sum(a) + tf.reduce_sum(b * 2.0), [emb])
        assert g.values.name == "gradients/concat:0"
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            dense = s.run(tf.convert_to_tensor(g))
    np.testing.assert_allclose(dense[:, 0], [1, 0, 5, 0, 0, 0, 0])


def test_gather_and_scatter_nd_out_of_range_errors():
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0\] = \[5, 0\]"):
            s.run(tf.gather_nd(tf.zeros([2, 3]), [[5, 0]]))
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0\] = \[5\]"):
            s.run(tf.scatter_nd([[5]], [1.0], [3]))
