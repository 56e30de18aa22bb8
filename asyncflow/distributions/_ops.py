"""The graph builders the distributions use, gathered from their op families.

Imported from the families directly (not from the `asyncflow` package, which imports
this package), so no import cycle forms.
"""

# ruff: noqa: F401 - a re-export namespace: each name is used as `ops.<name>`

from asyncflow.framework_extras import assert_same_float_dtype
from asyncflow.math_composites import reduce_logsumexp, where_v2
from asyncflow.math_composites_2 import lbeta
from asyncflow.ops.array_ops import (
    constant,
    expand_dims,
    fill,
    identity,
    ones,
    ones_like,
    rank,
    reshape,
    shape,
    transpose,
    zeros,
    zeros_like,
)
from asyncflow.ops.cast_ops import cast
from asyncflow.ops.check_ops import (
    Assert,
    assert_equal,
    assert_greater_equal,
    assert_less,
    assert_less_equal,
    assert_near,
    assert_non_negative,
    assert_positive,
    assert_rank_at_least,
)
from asyncflow.ops.framework_ops import broadcast_dynamic_shape, broadcast_static_shape
from asyncflow.ops.functional_ops import map_fn
from asyncflow.ops.linalg_matrix_ops import matrix_set_diag
from asyncflow.ops.manip_ops import concat, stack
from asyncflow.ops.math_more_ops import ndtri
from asyncflow.ops.math_ops import (
    abs,  # noqa: A004 - TF's name
    exp,
    expm1,
    floor,
    greater,
    greater_equal,
    less,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    rsqrt,
    sigmoid,
    sign,
    sqrt,
    square,
    squared_difference,
)
from asyncflow.ops.math_special_ops import betainc, igamma, igammac
from asyncflow.ops.matmul_ops import matmul
from asyncflow.ops.nn_impl import (
    sigmoid_cross_entropy_with_logits,
    sparse_softmax_cross_entropy_with_logits,
)
from asyncflow.ops.nn_ops import log_softmax, softmax, softplus
from asyncflow.ops.random_more_ops import random_gamma
from asyncflow.ops.random_ops import multinomial, random_normal, random_uniform
from asyncflow.ops.reduction_ops import (
    argmax,
    range,
    reduce_all,
    reduce_any,
    reduce_prod,
    reduce_sum,
)
from asyncflow.ops.sequence_ops import sequence_mask
from asyncflow.ops.slicing_ops import gather, one_hot
from asyncflow.ops.special_math_ops import digamma, erf, erfc, is_nan, lgamma, xlogy

__all__ = [n for n in dir() if not n.startswith("_") and n != "annotations"]
