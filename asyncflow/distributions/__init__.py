"""`tf.distributions` (TF1's, `tf.compat.v1.distributions`): probability distributions
whose parameters, samples, densities and statistics are graph tensors, and the KL
divergences registered between them.
"""

from asyncflow.distributions.bernoulli import Bernoulli
from asyncflow.distributions.beta import Beta
from asyncflow.distributions.categorical import Categorical
from asyncflow.distributions.dirichlet import Dirichlet
from asyncflow.distributions.distribution import (
    FULLY_REPARAMETERIZED,
    NOT_REPARAMETERIZED,
    Distribution,
    ReparameterizationType,
)
from asyncflow.distributions.gamma import Exponential, Gamma
from asyncflow.distributions.kullback_leibler import RegisterKL, kl_divergence
from asyncflow.distributions.laplace import Laplace
from asyncflow.distributions.multinomial import DirichletMultinomial, Multinomial
from asyncflow.distributions.normal import Normal
from asyncflow.distributions.student_t import StudentT
from asyncflow.distributions.uniform import Uniform

__all__ = [
    "FULLY_REPARAMETERIZED",
    "NOT_REPARAMETERIZED",
    "Bernoulli",
    "Beta",
    "Categorical",
    "Dirichlet",
    "DirichletMultinomial",
    "Distribution",
    "Exponential",
    "Gamma",
    "Laplace",
    "Multinomial",
    "Normal",
    "RegisterKL",
    "ReparameterizationType",
    "StudentT",
    "Uniform",
    "kl_divergence",
]
