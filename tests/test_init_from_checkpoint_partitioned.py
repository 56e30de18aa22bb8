"""tf.train.init_from_checkpoint into partitioned variables, by name or by scope, as TF
2.21 does it: each part loads its slice of the checkpoint's whole tensor (TF printed the
same values for this program)."""

import numpy as np

import asyncflow as af


def _save(path):
    with af.Graph().as_default():
        with af.variable_scope("part", partitioner=af.fixed_size_partitioner(2)):
            af.get_variable("p", [4, 2], initializer=af.random_uniform_initializer(seed=3))
        with af.variable_scope("enc"):
            af.get_variable("w", [4, 3], initializer=af.constant_initializer(np.arange(12.0)))
        saver = af.train.Saver()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            saver.save(sess, str(path / "model"))
    return af.train.load_variable(str(path), "part/p")


def test_a_partitioned_variable_loads_its_slices(tmp_path):
    saved = _save(tmp_path)
    with af.Graph().as_default():
        with af.variable_scope("np", partitioner=af.fixed_size_partitioner(2)):
            by_name = af.get_variable("p", [4, 2])
        with af.variable_scope("nq", partitioner=af.fixed_size_partitioner(4)):
            by_object = af.get_variable("p", [4, 2])
        af.train.init_from_checkpoint(str(tmp_path), {"part/p": "np/p"})
        af.train.init_from_checkpoint(str(tmp_path), {"part/p": by_object})
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(af.convert_to_tensor(by_name)), saved)
            np.testing.assert_array_equal(sess.run(af.convert_to_tensor(by_object)), saved)


def test_a_scope_mapping_takes_partitioned_variables(tmp_path):
    saved = _save(tmp_path)
    with af.Graph().as_default():
        with af.variable_scope("part", partitioner=af.fixed_size_partitioner(2)):
            p = af.get_variable("p", [4, 2])
        with af.variable_scope("enc"):
            w = af.get_variable("w", [4, 3])
        af.train.init_from_checkpoint(str(tmp_path), {"/": "/"})
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(af.convert_to_tensor(p)), saved)
            np.testing.assert_array_equal(sess.run(w), np.arange(12.0).reshape(4, 3))
