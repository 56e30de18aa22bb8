"""The canned estimators' optimizer argument: an instance, a name, or a callable."""

from __future__ import annotations

from asyncflow.train import optimizers as opt_lib
from asyncflow.train.optimizer import Optimizer

_BY_NAME = {
    "Adagrad": opt_lib.AdagradOptimizer,
    "Adam": opt_lib.AdamOptimizer,
    "Ftrl": opt_lib.FtrlOptimizer,
    "RMSProp": opt_lib.RMSPropOptimizer,
    "SGD": opt_lib.GradientDescentOptimizer,
}


def get_optimizer_instance(opt, learning_rate=None) -> Optimizer:
    """`opt` as an Optimizer: names take `learning_rate`; callables are called.

    Raises:
      ValueError: an unknown name, or a name without learning_rate.
    """
    if isinstance(opt, str):
        if opt not in _BY_NAME:
            raise ValueError(
                f"Unsupported optimizer name: {opt}. Supported names are: "
                f"{tuple(sorted(_BY_NAME))}"
            )
        if not learning_rate:
            raise ValueError("learning_rate must be specified when opt is string.")
        return _BY_NAME[opt](learning_rate=learning_rate)
    if callable(opt) and not isinstance(opt, Optimizer):
        opt = opt()
    if not isinstance(opt, Optimizer):
        raise ValueError(f"The given object is not an Optimizer instance. Given: {opt}")
    return opt
