"""Names TF 2.21's tf.compat.v1 lists in sub-namespaces asyncflow spelled elsewhere:
tf.random.experimental, tf.dtypes' four ops, tf.app.flags."""

import asyncflow as af


def test_random_experimental():
    x = af.random.experimental
    assert x.stateless_fold_in is af.random.fold_in
    assert x.stateless_split is af.random.split
    assert x.Generator is af.random.Generator
    assert x.get_global_generator is af.random.get_global_generator
    assert x.set_global_generator is af.random.set_global_generator
    assert x.Algorithm is af.random.Algorithm
    assert x.create_rng_state is af.random.create_rng_state


def test_dtypes_functions():
    for name in ("as_string", "cast", "complex", "saturate_cast"):
        assert getattr(af.dtypes, name) is getattr(af, name)
    assert not hasattr(af.dtypes, "no_such_name")
