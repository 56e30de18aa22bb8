"""`tf.random.experimental`: the Generator and stateless-seed names TF 2.21 also lists
there (`stateless_fold_in` and `stateless_split` are `tf.random.fold_in` / `split`), and
the seeded shuffles `index_shuffle` / `stateless_shuffle`."""

from asyncflow.ops.stateless_random_ops import Algorithm, create_rng_state
from asyncflow.ops.stateless_random_ops import fold_in as stateless_fold_in
from asyncflow.ops.stateless_random_ops import split as stateless_split
from asyncflow.random_generator import Generator, get_global_generator, set_global_generator
from asyncflow.random_shuffles import index_shuffle, stateless_shuffle

__all__ = [
    "Algorithm",
    "Generator",
    "create_rng_state",
    "get_global_generator",
    "index_shuffle",
    "set_global_generator",
    "stateless_fold_in",
    "stateless_shuffle",
    "stateless_split",
]
