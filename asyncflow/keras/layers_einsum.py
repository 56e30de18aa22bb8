"""`tf.keras.layers` EinsumDense (a dense layer written as an einsum equation) and
MultiHeadAttention (query/key/value/output projections made of EinsumDense, scaled dot
products over `attention_axes`), as TF 2.21's tf_keras builds them: the same equations,
sublayer and weight names ("multi_head_attention/query/kernel"), shapes, outputs,
configs and errors, in TF1 graph mode."""

from __future__ import annotations

import math
import re
import string

from asyncflow import dtypes, tensor_shape
from asyncflow.keras import activations, backend
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import Layer
from asyncflow.keras.layers_more import _get
from asyncflow.ops import (
    array_ops,
    cast_ops,
    einsum_ops,
    gradient_ops,
    math_ops,
    nn_impl,
    nn_ops,
    reduction_ops,
)

__all__ = ["EinsumDense", "MultiHeadAttention"]

_LETTERS = string.ascii_lowercase


def _dims(shape) -> list:
    return tensor_shape.TensorShape(shape).as_list()


def _analyze(equation, bias_axes, input_shape, output_shape):
    """(kernel shape, bias shape or None, full output shape) of an EinsumDense.

    Raises:
      ValueError: an equation not of the forms ab,bc->ac / ...b,bc->...c /
        ab...,bc->ac...; shared input/output axes of different sizes; an output or
        kernel letter with no source; a bias letter not in the output.
    """
    plain = equation.replace("...", "0")
    forms = [
        (r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$", False, False),
        (r"0([a-zA-Z]+),([a-zA-Z]+)->0([a-zA-Z]+)$", True, True),
        (r"([a-zA-Z]{2,})0,([a-zA-Z]+)->([a-zA-Z]+)0$", True, False),
    ]
    found = [(re.match(p, plain), e, lf) for p, e, lf in forms]
    found = [f for f in found if f[0]]
    if not found:
        raise ValueError(
            f"Invalid einsum equation '{equation}'. Equations must be in the form "
            "[X],[Y]->[Z], ...[X],[Y]->...[Z], or [X]...,[Y]->[Z]...."
        )
    match, elided_form, left = found[0]
    in_spec, w_spec, out_spec = match.groups()
    elided = len(input_shape) - len(in_spec) if elided_form else 0
    out = [output_shape] if isinstance(output_shape, int) else list(output_shape)
    out.insert(0, input_shape[0])
    if elided > 0 and left:
        for i in range(1, elided):
            out.insert(1, input_shape[i])
    elif elided > 0:
        out.extend(input_shape[len(input_shape) - elided :])
    if left:
        in_map = {c: i + elided - len(input_shape) for i, c in enumerate(in_spec)}
        out_map = {c: i + elided for i, c in enumerate(out_spec)}
    else:
        in_map = {c: i for i, c in enumerate(in_spec)}
        out_map = {c: i for i, c in enumerate(out_spec)}
    for c in in_spec:
        if c in out_map:
            size_in, size_out = input_shape[in_map[c]], out[out_map[c]]
            if size_out is not None and size_out != size_in:
                raise ValueError(
                    f"Input shape and output shape do not match at shared dimension '{c}'. "
                    f"Input shape is {size_in}, and output shape is {size_out}."
                )
    for c in out_spec:
        if c not in in_spec and c not in w_spec:
            raise ValueError(
                f"Dimension '{c}' was specified in the output '{out_spec}' but has no "
                f"corresponding dim in the input spec '{in_spec}' or weight spec '{out_spec}'"
            )
    kernel = []
    for c in w_spec:
        if c in in_map:
            kernel.append(input_shape[in_map[c]])
        elif c in out_map:
            kernel.append(out[out_map[c]])
        else:
            raise ValueError(
                f"Weight dimension '{c}' did not have a match in either the input spec "
                f"'{in_spec}' or the output spec '{out_spec}'. For this layer, the weight "
                "must be fully specified."
            )
    bias = None
    if bias_axes is not None:
        for c in bias_axes:
            if c not in out_spec:
                raise ValueError(
                    f"Bias dimension '{c}' was requested, but is not part of the output "
                    f"spec '{out_spec}'"
                )
        first = min(out_spec.find(c) for c in bias_axes)
        bias = [out[out_map[c]] if c in bias_axes else 1 for c in out_spec[first:]]
        if not left:
            bias.extend([1] * elided)
    return kernel, bias, out


class EinsumDense(Layer):
    """`einsum(equation, inputs, kernel)` (+ bias over `bias_axes`), then `activation`;
    `output_shape` is the output's shape without the batch axis (None: as the input's)."""

    def __init__(
        self,
        equation,
        output_shape,
        activation=None,
        bias_axes=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(activity_regularizer=_get("regularizer", activity_regularizer), **kwargs)
        self.equation = equation
        self.partial_output_shape = (
            [output_shape] if isinstance(output_shape, int) else list(output_shape)
        )
        self.bias_axes = bias_axes
        self.activation = activations.get(activation)
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _get("regularizer", kernel_regularizer)
        self.bias_regularizer = _get("regularizer", bias_regularizer)
        self.kernel_constraint = _get("constraint", kernel_constraint)
        self.bias_constraint = _get("constraint", bias_constraint)

    def build(self, input_shape) -> None:
        kernel, bias, out = _analyze(
            self.equation, self.bias_axes, _dims(input_shape), self.partial_output_shape
        )
        self.full_output_shape = out
        self.kernel = self.add_weight(
            "kernel",
            shape=kernel,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = None
        if bias is not None:
            self.bias = self.add_weight(
                "bias",
                shape=bias,
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self.built = True

    def compute_output_shape(self, input_shape):
        return tensor_shape.TensorShape(self.full_output_shape)

    def call(self, inputs):
        out = einsum_ops.einsum(self.equation, inputs, self.kernel)
        if self.bias is not None:
            out = out + self.bias
        return self.activation(out) if self.activation is not None else out


def _projection(free_dims, bound_dims, output_dims):
    """(equation, bias axes, output rank) of a projection that keeps `free_dims` axes,
    contracts the next `bound_dims` and adds `output_dims`."""
    inp, kernel, out, bias = "", "", "", ""
    for i in range(free_dims):
        inp += _LETTERS[i]
        out += _LETTERS[i]
    for i in range(free_dims, free_dims + bound_dims):
        inp += _LETTERS[i]
        kernel += _LETTERS[i]
    for i in range(free_dims + bound_dims, free_dims + bound_dims + output_dims):
        kernel += _LETTERS[i]
        out += _LETTERS[i]
        bias += _LETTERS[i]
    return f"{inp},{kernel}->{out}", bias, len(out)


def _attention_equations(rank, attn_axes):
    """(scores equation, combine equation, scores rank) for projected tensors of `rank`
    attending over `attn_axes`."""
    target = _LETTERS[:rank]
    batch_dims = [i for i in range(rank) if i not in attn_axes and i != rank - 1]
    source, offset = "", rank
    for i in range(rank):
        if i in batch_dims or i == rank - 1:
            source += target[i]
        else:
            source += _LETTERS[offset]
            offset += 1
    product = "".join(
        [target[i] for i in batch_dims]
        + [target[i] for i in attn_axes]
        + [source[i] for i in attn_axes]
    )
    return f"{source},{target}->{product}", f"{product},{source}->{target}", len(product)


def _clone(initializer):
    # Each projection gets its own copy, as Keras clones the initializer per sublayer.
    if hasattr(initializer, "get_config") and hasattr(type(initializer), "from_config"):
        return type(initializer).from_config(initializer.get_config())
    return initializer


def _tail_shape(rank, known):
    return [None] * (rank - len(known)) + list(known)


class MultiHeadAttention(Layer):
    """Multi-head attention: `num_heads` heads of size `key_dim` (values `value_dim`)
    projected from query, key (default: value) and value by EinsumDense sublayers
    "query", "key", "value", attending over `attention_axes` (default: all but batch,
    heads and features) and projected back by "attention_output".

    Call: `layer(query, value, key=None, attention_mask=None,
    return_attention_scores=False, training=None, use_causal_mask=False)`.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(activity_regularizer=_get("regularizer", activity_regularizer), **kwargs)
        self.supports_masking = True
        self._num_heads, self._key_dim = num_heads, key_dim
        self._value_dim = value_dim if value_dim else key_dim
        self._dropout, self._use_bias = dropout, use_bias
        self._output_shape = output_shape
        self._kernel_initializer = _init.get(kernel_initializer)
        self._bias_initializer = _init.get(bias_initializer)
        self._kernel_regularizer = _get("regularizer", kernel_regularizer)
        self._bias_regularizer = _get("regularizer", bias_regularizer)
        self._kernel_constraint = _get("constraint", kernel_constraint)
        self._bias_constraint = _get("constraint", bias_constraint)
        if attention_axes is not None and not isinstance(attention_axes, (list, tuple)):
            attention_axes = (attention_axes,)
        self._attention_axes = None if attention_axes is None else tuple(attention_axes)
        self._query_shape = self._key_shape = self._value_shape = None
        self._built_from_signature = False

    # The inputs after the query, which configs write as keyword tensors, as Keras does.
    _tensor_keywords = ("value", "key")

    def __call__(self, query, value=None, key=None, **kwargs):
        # Keras passes value (and key) as call arguments; asyncflow's base records the
        # node on the first positional input, so the three go in as one list (a config
        # writes them back as Keras does, value and key by keyword).
        if value is None and isinstance(query, (list, tuple)):
            query, value, key = (list(query) + [None])[:3]
        inputs = [query, value] if key is None else [query, value, key]
        return super().__call__(inputs, **kwargs)

    def _dense(self, equation, shape, bias_axes, name):
        dense = EinsumDense(
            equation,
            output_shape=shape,
            bias_axes=bias_axes if self._use_bias else None,
            name=name,
            kernel_initializer=_clone(self._kernel_initializer),
            bias_initializer=_clone(self._bias_initializer),
            kernel_regularizer=self._kernel_regularizer,
            bias_regularizer=self._bias_regularizer,
            kernel_constraint=self._kernel_constraint,
            bias_constraint=self._bias_constraint,
        )  # fmt: skip
        # Held in private attributes (as Keras names them), which the base does not
        # track by itself: the projections' weights are this layer's.
        self.__dict__.setdefault("_tracked_layers", []).append(dense)
        return dense

    def build(self, input_shape) -> None:
        shapes = [_dims(s) for s in input_shape]
        q_shape, v_shape = shapes[0], shapes[1]
        k_shape = shapes[2] if len(shapes) > 2 else v_shape
        self._query_shape, self._value_shape, self._key_shape = q_shape, v_shape, k_shape
        q_rank = len(q_shape)
        eq, bias, rank = _projection(q_rank - 1, 1, 2)
        self._query_dense = self._dense(
            eq, _tail_shape(rank - 1, [self._num_heads, self._key_dim]), bias, "query"
        )
        eq, bias, rank = _projection(len(k_shape) - 1, 1, 2)
        self._key_dense = self._dense(
            eq, _tail_shape(rank - 1, [self._num_heads, self._key_dim]), bias, "key"
        )
        eq, bias, rank = _projection(len(v_shape) - 1, 1, 2)
        self._value_dense = self._dense(
            eq, _tail_shape(rank - 1, [self._num_heads, self._value_dim]), bias, "value"
        )
        axes = self._attention_axes
        if axes is None:
            axes = tuple(range(1, rank - 2))
        self._attn_axes = tuple(a % rank if a < 0 else a for a in axes)
        self._attention_axes = self._attn_axes
        self._dot_eq, self._combine_eq, scores_rank = _attention_equations(rank, self._attn_axes)
        self._norm_axes = tuple(range(scores_rank - len(self._attn_axes), scores_rank))
        out_shape = self._output_shape
        if out_shape is None:
            out_shape = [q_shape[-1]]
        elif not isinstance(out_shape, (list, tuple)):
            out_shape = [out_shape]
        eq, bias, rank_out = _projection(q_rank - 1, 2, len(out_shape))
        self._output_dense = self._dense(
            eq, _tail_shape(rank_out - 1, out_shape), bias, "attention_output"
        )
        self._built_from_signature = True
        self.built = True

    def _softmax(self, scores, mask):
        if mask is not None:
            for _ in range(scores.shape.ndims - mask.shape.ndims):
                mask = array_ops.expand_dims(mask, -len(self._attn_axes) * 2 - 1)
            big = dtypes.float16.min if scores.dtype == dtypes.float16 else -1e9
            scores = scores + (1.0 - cast_ops.cast(mask, scores.dtype)) * big
        if len(self._norm_axes) == 1:
            return nn_ops.softmax(scores, axis=self._norm_axes[0])
        axes = list(self._norm_axes)
        shifted = scores - reduction_ops.reduce_max(scores, axes, keepdims=True)
        e = math_ops.exp(shifted)
        return e / reduction_ops.reduce_sum(e, axes, keepdims=True)

    def call(
        self,
        inputs,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) > 2 else value
        if use_causal_mask:
            q_len, v_len = array_ops.shape(query)[1], array_ops.shape(value)[1]
            ones = cast_ops.cast(
                array_ops.ones(array_ops.stack([1, q_len, v_len]), dtypes.int32), dtypes.int32
            )
            causal = math_ops.greater_equal(
                gradient_ops.cumsum(ones, axis=-2), gradient_ops.cumsum(ones, axis=-1)
            )
            if attention_mask is None:
                attention_mask = causal
            else:
                attention_mask = math_ops.logical_and(
                    cast_ops.cast(attention_mask, dtypes.bool), causal
                )
        query = self._query_dense(query)
        key = self._key_dense(key)
        value = self._value_dense(value)
        query = query * (1.0 / math.sqrt(float(self._key_dim)))
        scores = einsum_ops.einsum(self._dot_eq, key, query)
        scores = self._softmax(scores, attention_mask)
        dropped = scores
        if self._dropout > 0:
            dropped = backend.in_train_phase(
                lambda: nn_impl.dropout(scores, rate=self._dropout),
                lambda: array_ops.identity(scores),
                training=training,
            )
        out = einsum_ops.einsum(self._combine_eq, dropped, value)
        out = self._output_dense(out)
        if return_attention_scores:
            return out, scores
        return out
