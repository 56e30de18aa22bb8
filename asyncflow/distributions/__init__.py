"""`tf.distributions` (TF1's, `tf.compat.v1.distributions`): probability distributions
whose parameters, samples, densities and statistics are graph tensors, and the KL
divergences registered between them.
"""

from asyncflow.distributions.bernoulli import Bernoulli
from asyncflow.distributions.categorical import Categorical
from asyncflow.distributions.distribution import (
    FULLY_REPARAMETERIZED,
    NOT_REPARAMETERIZED,
    Distribution,
    ReparameterizationType,
)
from asyncflow.distributions.kullback_leibler import RegisterKL, kl_divergence
from asyncflow.distributions.normal import Normal
from asyncflow.distributions.uniform import Uniform

__all__ = [
    "FULLY_REPARAMETERIZED",
    "NOT_REPARAMETERIZED",
    "Bernoulli",
    "Categorical",
    "Distribution",
    "Normal",
    "RegisterKL",
    "ReparameterizationType",
    "Uniform",
    "kl_divergence",
]
