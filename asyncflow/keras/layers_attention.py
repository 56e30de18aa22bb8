"""`tf.keras.layers` Dot, Attention (Luong-style dot or concat scores) and
AdditiveAttention (Bahdanau-style): TF 2.21 tf_keras' weights, outputs, configs and
errors in TF1 graph mode.  Masks are taken from an explicit `mask=[query_mask,
value_mask]` argument (asyncflow's Keras does not carry masks between layers)."""

from __future__ import annotations

from asyncflow import dtypes, tensor_shape
from asyncflow.keras import backend
from asyncflow.keras.engine import Layer
from asyncflow.ops import (
    array_ops,
    cast_ops,
    math_ops,
    matmul_ops,
    nn_impl,
    nn_ops,
    reduction_ops,
)

__all__ = ["Dot", "dot", "Attention", "AdditiveAttention"]


def _dims(shape) -> list:
    return tensor_shape.TensorShape(shape).as_list()


def batch_dot(x, y, axes):
    """Keras' batch_dot: per example, contracts x's axis axes[0] with y's axis axes[1];
    the result keeps x's other axes then y's (a 1-element axis when both are vectors)."""
    xd, yd = x.shape.as_list(), y.shape.as_list()
    ax, ay = axes
    x_rest = [i for i in range(1, len(xd)) if i != ax]
    y_rest = [i for i in range(1, len(yd)) if i != ay]
    xt = array_ops.transpose(x, [0, *x_rest, ax])
    yt = array_ops.transpose(y, [0, ay, *y_rest])
    depth = xd[ax] if xd[ax] is not None else yd[ay]
    if depth is None:
        depth = array_ops.shape(x)[ax]
    xm = array_ops.reshape(xt, [-1, _prod([xd[i] for i in x_rest]), depth])
    ym = array_ops.reshape(yt, [-1, depth, _prod([yd[i] for i in y_rest])])
    out = matmul_ops.matmul(xm, ym)
    shape = [xd[i] for i in x_rest] + [yd[i] for i in y_rest]
    return array_ops.reshape(out, [-1, *shape] if shape else [-1, 1])


def _shape_text(shape) -> str:
    dims = _dims(shape)
    return "None" if dims is None else str(tuple(dims))


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


class Dot(Layer):
    """Dot product of two tensors per example along `axes` (an int, or one per input);
    `normalize=True` L2-normalizes both along those axes first (cosine proximity).

    Raises:
      TypeError: `axes` not an int, list or tuple.
      ValueError: `axes` not two integers; (when built) not 2 inputs, or the contracted
        axes of different sizes.
    """

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(axes, int):
            if not isinstance(axes, (list, tuple)):
                raise TypeError(
                    "Invalid type for argument `axes`: it should be a list or an int. "
                    f"Received: axes={axes}"
                )
            if len(axes) != 2:
                raise ValueError(
                    "Invalid format for argument `axes`: it should contain two elements. "
                    f"Received: axes={axes}"
                )
            if not all(isinstance(a, int) for a in axes):
                raise ValueError(
                    "Invalid format for argument `axes`: list elements should be integers. "
                    f"Received: axes={axes}"
                )
        self.axes, self.normalize = axes, normalize
        self.supports_masking = True

    def _axes(self, n1, n2) -> list:
        if isinstance(self.axes, int):
            return [self.axes % n1, self.axes % n2] if self.axes < 0 else [self.axes] * 2
        return [a % n if a < 0 else a for a, n in zip(self.axes, (n1, n2))]

    def build(self, input_shape) -> None:
        if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2:
            raise ValueError(
                "A `Dot` layer should be called on a list of 2 inputs. "
                f"Received: input_shape={_shape_text(input_shape)}"
            )
        s1, s2 = _dims(input_shape[0]), _dims(input_shape[1])
        if s1 is None or s2 is None:
            return
        a1, a2 = self._axes(len(s1), len(s2))
        if s1[a1] is not None and s2[a2] is not None and s1[a1] != s2[a2]:
            raise ValueError(
                f"Incompatible input shapes: axis values {s1[a1]} (at axis {a1}) != "
                f"{s2[a2]} (at axis {a2}). Full input shapes: {tuple(s1)}, {tuple(s2)}"
            )
        self.built = True

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ValueError(
                f"A `Dot` layer should be called on exactly 2 inputs. Received: inputs={inputs}"
            )
        x1, x2 = inputs
        axes = self._axes(x1.shape.ndims, x2.shape.ndims)
        if self.normalize:
            x1 = nn_impl.l2_normalize(x1, axis=axes[0])
            x2 = nn_impl.l2_normalize(x2, axis=axes[1])
        return batch_dot(x1, x2, axes)


def dot(inputs, axes, normalize=False, **kwargs):
    """`Dot(axes, normalize, **kwargs)(inputs)`."""
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)


def _lower_triangle(rows, cols):
    """[rows, cols] bool: True where column <= row (a query sees only earlier values)."""
    row = array_ops.expand_dims(reduction_ops.range(rows), -1)
    col = array_ops.expand_dims(reduction_ops.range(cols), 0)
    return math_ops.greater_equal(row, col)


class _BaseAttention(Layer):
    """Scores queries against keys, softmaxes over the values' steps (masked values and,
    with use_causal_mask, later steps excluded) and returns the weighted values."""

    def __init__(self, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        self.supports_masking = True

    def _check(self, inputs) -> None:
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(
                f"{name} layer must be called on a list of inputs, namely [query, value] "
                f"or [query, value, key]. Received: {inputs}."
            )
        if len(inputs) not in (2, 3):
            raise ValueError(
                f"{name} layer accepts inputs list of length 2 or 3, namely [query, value] "
                f"or [query, value, key]. Received length: {len(inputs)}."
            )

    def __call__(self, inputs, *args, **kwargs):
        self._check(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _scores(self, query, key):
        raise NotImplementedError

    def call(
        self,
        inputs,
        mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        self._check(inputs)
        q, v = inputs[0], inputs[1]
        k = inputs[2] if len(inputs) > 2 else v
        q_mask = mask[0] if mask else None
        v_mask = mask[1] if mask else None
        scores = self._scores(q, k)
        scores_mask = None
        if v_mask is not None:
            scores_mask = array_ops.expand_dims(v_mask, -2)
        if use_causal_mask:
            shape = array_ops.shape(scores)
            causal = _lower_triangle(shape[-2], shape[-1])
            scores_mask = (
                causal if scores_mask is None else math_ops.logical_and(scores_mask, causal)
            )
        if scores_mask is not None:
            big = 65504.0 if scores.dtype == dtypes.float16 else 1.0e9
            padding = cast_ops.cast(math_ops.logical_not(scores_mask), scores.dtype)
            scores = scores - big * padding
        weights = nn_ops.softmax(scores)
        if self.dropout > 0:
            kept = weights
            weights = backend.in_train_phase(
                lambda: nn_impl.dropout(kept, rate=self.dropout),
                lambda: array_ops.identity(kept),
                training=training,
            )
        result = matmul_ops.matmul(weights, v)
        if q_mask is not None:
            result = result * cast_ops.cast(array_ops.expand_dims(q_mask, -1), result.dtype)
        if return_attention_scores:
            return result, weights
        return result


class Attention(_BaseAttention):
    """Dot-product attention (Luong): scores = query . key (times a learned scalar
    `scale` when use_scale), or with score_mode="concat" a learned scalar
    `concat_score_weight` times sum(tanh(query + key)).

    Raises:
      ValueError: score_mode other than "dot" or "concat"; inputs not a list of 2 or 3.
    """

    def __init__(self, use_scale=False, score_mode="dot", **kwargs):
        super().__init__(**kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(
                f'Received: score_mode={score_mode}. Acceptable values are: ["dot", "concat"]'
            )
        self.use_scale, self.score_mode = use_scale, score_mode

    def build(self, input_shape) -> None:
        self.scale = self.concat_score_weight = None
        if self.use_scale:
            self.scale = self.add_weight("scale", shape=(), initializer="ones")
        if self.score_mode == "concat":
            self.concat_score_weight = self.add_weight(
                "concat_score_weight", shape=(), initializer="ones"
            )
        self.built = True

    def _scores(self, query, key):
        if self.score_mode == "dot":
            scores = matmul_ops.matmul(query, key, transpose_b=True)
            return scores * self.scale if self.scale is not None else scores
        summed = array_ops.expand_dims(query, -2) + array_ops.expand_dims(key, -3)
        if self.scale is not None:
            summed = self.scale * summed
        return self.concat_score_weight * reduction_ops.reduce_sum(math_ops.tanh(summed), -1)


class AdditiveAttention(_BaseAttention):
    """Additive attention (Bahdanau): scores = sum(scale * tanh(query + key)) with a
    learned per-feature `scale` (glorot_uniform) when use_scale."""

    def __init__(self, use_scale=True, **kwargs):
        super().__init__(**kwargs)
        self.use_scale = use_scale

    def build(self, input_shape) -> None:
        dim = _dims(input_shape[1])[-1]
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight("scale", shape=[dim], initializer="glorot_uniform")
        self.built = True

    def _scores(self, query, key):
        summed = math_ops.tanh(array_ops.expand_dims(query, -2) + array_ops.expand_dims(key, -3))
        if self.scale is not None:
            summed = self.scale * summed
        return reduction_ops.reduce_sum(summed, -1)
