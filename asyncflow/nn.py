"""`af.nn`: neural-network ops (TF1's `tf.nn`)."""

from asyncflow import nn_composites, rnn_cell
from asyncflow.ops import (
    candidate_sampling_ops,
    conv3d_ops,
    conv_ops,
    conv_pool_nd,
    ctc_ops,
    dilation_ops,
    nn_impl,
    nn_ops,
    pooling_argmax_ops,
    pooling_ops,
    quantized_nn_ops,
)
from asyncflow.ops.math_ops import sigmoid, tanh
from asyncflow.ops.sequence_ops import sequence_mask
from asyncflow.rnn import dynamic_rnn, static_rnn
from asyncflow.rnn_bidirectional import bidirectional_dynamic_rnn, static_bidirectional_rnn

__all__ = ["sigmoid", "tanh", "rnn_cell", "dynamic_rnn", "static_rnn"]
__all__ += ["sequence_mask", "bidirectional_dynamic_rnn", "static_bidirectional_rnn"]
from asyncflow.ops.space_ops import space_to_batch, with_space_to_batch  # noqa: E402

__all__ += ["space_to_batch", "with_space_to_batch"]
from asyncflow.nn_sparse_extras import collapse_repeated, safe_embedding_lookup_sparse  # noqa: E402

__all__ += ["collapse_repeated", "safe_embedding_lookup_sparse"]
from asyncflow.ops.approx_topk_ops import approx_max_k, approx_min_k  # noqa: E402
from asyncflow.ops.fractional_pool_ops import fractional_avg_pool, fractional_max_pool  # noqa: E402
from asyncflow.rnn_extras import raw_rnn, static_state_saving_rnn  # noqa: E402

__all__ += ["approx_max_k", "approx_min_k", "fractional_avg_pool", "fractional_max_pool"]
__all__ += ["raw_rnn", "static_state_saving_rnn"]
for _m in (
    nn_ops,
    conv_ops,
    conv3d_ops,
    pooling_ops,
    pooling_argmax_ops,
    dilation_ops,
    conv_pool_nd,
    nn_impl,
    candidate_sampling_ops,
    quantized_nn_ops,
    nn_composites,
    ctc_ops,
):
    for _name in _m.__all__:
        globals()[_name] = getattr(_m, _name)
        __all__.append(_name)
del _m, _name
from asyncflow import nn_experimental as _nn_experimental  # noqa: E402


class _Experimental:
    """`tf.nn.experimental`."""

    general_dropout = staticmethod(_nn_experimental.general_dropout)
    stateless_dropout = staticmethod(_nn_experimental.stateless_dropout)


experimental = _Experimental()
__all__.append("experimental")
