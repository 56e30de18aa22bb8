"""`tf.tpu.experimental.embedding`'s configuration classes, plain Python as TF's: the
embedding optimizers (SGD, Adagrad, AdagradMomentum, Adam, FTRL, CustomOptimizer),
CustomCombiner, QuantizationConfig, TableConfig, FeatureConfig, RowIdInitializer and
SparseCoreEmbeddingConfig.

They validate their arguments as TF 2.21's do (its messages, a slip in Adam's beta_2
message included: it shows beta_1), and compare equal attribute by attribute.
Optimizers carry their slots' names and initializers, which `TPUEmbedding.build`
creates beside each table.
"""

from __future__ import annotations

import dataclasses
import math

from asyncflow import dtypes
from asyncflow.ops import init_ops
from asyncflow.tensor_shape import TensorShape

__all__ = [
    "FTRL",
    "SGD",
    "Adagrad",
    "AdagradMomentum",
    "Adam",
    "CustomCombiner",
    "CustomOptimizer",
    "FeatureConfig",
    "QuantizationConfig",
    "RowIdInitializer",
    "SparseCoreEmbeddingConfig",
    "TableConfig",
]


class _WithSlotVariables:
    """What holds slot variables: their names and initializers, and an optional
    `slot_variable_creation_fn(table, names, initializers)` creating them."""

    def __init__(self, slot_variable_creation_fn=None):
        if slot_variable_creation_fn is not None and not callable(slot_variable_creation_fn):
            raise ValueError(
                "Argument `slot_variable_creation_fn` must be either None or a "
                f"callable. Received: {slot_variable_creation_fn}"
            )
        self.slot_variable_creation_fn = slot_variable_creation_fn

    def _slot_names(self) -> list:
        return []

    def _slot_initializers(self) -> list:
        return []

    def _create_slots(self, table, variable_creator) -> dict:
        """The slot variables of `table` (a variable), by slot name."""
        names, initializers = self._slot_names(), self._slot_initializers()
        if self.slot_variable_creation_fn is not None:
            return self.slot_variable_creation_fn(table, names, initializers)
        return {n: variable_creator(n, init) for n, init in zip(names, initializers)}

    def __eq__(self, other):
        if not isinstance(other, self.__class__):
            return False
        return all(a == b for a, b in zip(self.__dict__.items(), other.__dict__.items()))

    def __hash__(self):
        return hash(tuple(self.__dict__.items()))


class _Optimizer(_WithSlotVariables):
    """The arguments every embedding optimizer takes.

    Raises:
      ValueError: `clipvalue` without gradient accumulation.
    """

    def __init__(self, learning_rate, use_gradient_accumulation, clip_weight_min,
                 clip_weight_max, weight_decay_factor,
                 multiply_weight_decay_factor_by_learning_rate, clipvalue=None,
                 slot_variable_creation_fn=None,
                 low_dimensional_packing_status=False):  # fmt: skip
        super().__init__(slot_variable_creation_fn=slot_variable_creation_fn)
        self.learning_rate = learning_rate
        self.use_gradient_accumulation = use_gradient_accumulation
        self.clip_weight_min = clip_weight_min
        self.clip_weight_max = clip_weight_max
        if not use_gradient_accumulation and clipvalue is not None:
            raise ValueError(
                "When `use_gradient_accumulation` is False, gradient clipping "
                "cannot be used and `clipvalue` should be left as None. "
                f"Received value {clipvalue} for argument `clipvalue`."
            )
        if clipvalue is None:
            clipvalue = (None, None)
        elif not isinstance(clipvalue, tuple):
            clipvalue = (-1.0 * clipvalue, clipvalue)
        self.clip_gradient_min, self.clip_gradient_max = clipvalue
        self.weight_decay_factor = weight_decay_factor
        self.multiply_weight_decay_factor_by_learning_rate = (
            multiply_weight_decay_factor_by_learning_rate
        )
        self.low_dimensional_packing_status = low_dimensional_packing_status


def _positive_accumulator(value) -> None:
    if value <= 0:
        raise ValueError(
            f"Argument `initial_accumulator_value` must be a positive float. Received: {value}"
        )


class SGD(_Optimizer):
    """Stochastic gradient descent for embedding tables (no slots)."""

    def __init__(self, learning_rate=0.01, use_gradient_accumulation=True,
                 clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
                 multiply_weight_decay_factor_by_learning_rate=None, clipvalue=None,
                 low_dimensional_packing_status=False):  # fmt: skip
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clipvalue, None,
                         low_dimensional_packing_status)  # fmt: skip


class Adagrad(_Optimizer):
    """Adagrad for embedding tables: slot `accumulators`.

    Raises:
      ValueError: `initial_accumulator_value` is not positive.
    """

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1,
                 use_gradient_accumulation=True, clip_weight_min=None, clip_weight_max=None,
                 weight_decay_factor=None, multiply_weight_decay_factor_by_learning_rate=None,
                 slot_variable_creation_fn=None, clipvalue=None,
                 low_dimensional_packing_status=False):  # fmt: skip
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clipvalue,
                         slot_variable_creation_fn, low_dimensional_packing_status)  # fmt: skip
        _positive_accumulator(initial_accumulator_value)
        self.initial_accumulator_value = initial_accumulator_value

    def _slot_names(self):
        return ["accumulators"]

    def _slot_initializers(self):
        return [init_ops.Constant(self.initial_accumulator_value)]


class AdagradMomentum(_Optimizer):
    """Adagrad with momentum for embedding tables: slots `accumulators`, `momenta`.

    Raises:
      ValueError: `epsilon` or `exponent` is not positive.
    """

    def __init__(self, learning_rate=0.001, momentum=0.0, use_nesterov=False, exponent=2,
                 beta2=1, epsilon=1e-10, use_gradient_accumulation=True,
                 clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
                 multiply_weight_decay_factor_by_learning_rate=None,
                 slot_variable_creation_fn=None, clipvalue=None,
                 low_dimensional_packing_status=False):  # fmt: skip
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clipvalue,
                         slot_variable_creation_fn, low_dimensional_packing_status)  # fmt: skip
        if epsilon <= 0:
            raise ValueError("Adagrad momentum: epsilon must be positive")
        if exponent <= 0:
            raise ValueError("Adagrad momentum: Precondition exponent must >0")
        self.momentum = momentum
        self.use_nesterov = use_nesterov
        self.exponent = exponent
        self.beta2 = beta2
        self.epsilon = epsilon

    def _slot_names(self):
        return ["accumulators", "momenta"]

    def _slot_initializers(self):
        return [init_ops.Constant(0), init_ops.Constant(0)]


class FTRL(_Optimizer):
    """FTRL for embedding tables: slots `accumulators`, `linears`.

    Raises:
      ValueError: `initial_accumulator_value` is not positive.
    """

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, beta=0.0,
                 initial_accumulator_value=0.1, use_gradient_accumulation=True,
                 clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
                 multiply_weight_decay_factor_by_learning_rate=None,
                 slot_variable_creation_fn=None, clipvalue=None,
                 multiply_linear_by_learning_rate=False, allow_zero_accumulator=False,
                 low_dimensional_packing_status=False):  # fmt: skip
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clipvalue,
                         slot_variable_creation_fn, low_dimensional_packing_status)  # fmt: skip
        _positive_accumulator(initial_accumulator_value)
        self.initial_accumulator_value = initial_accumulator_value
        self.learning_rate_power = learning_rate_power
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength
        self.beta = beta
        self.multiply_linear_by_learning_rate = multiply_linear_by_learning_rate
        self.allow_zero_accumulator = allow_zero_accumulator

    def _slot_names(self):
        return ["accumulators", "linears"]

    def _slot_initializers(self):
        return [init_ops.Constant(self.initial_accumulator_value), init_ops.Constant(0)]


class Adam(_Optimizer):
    """Adam for embedding tables: slots `momenta`, `velocities`.

    Raises:
      ValueError: a beta outside [0, 1), a non-positive epsilon, or non-lazy Adam
        without gradient accumulation.
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07,
                 lazy_adam=True, sum_inside_sqrt=True, use_gradient_accumulation=True,
                 clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
                 multiply_weight_decay_factor_by_learning_rate=None,
                 slot_variable_creation_fn=None, clipvalue=None,
                 low_dimensional_packing_status=False):  # fmt: skip
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clipvalue,
                         slot_variable_creation_fn, low_dimensional_packing_status)  # fmt: skip
        if beta_1 < 0.0 or beta_1 >= 1.0:
            raise ValueError(f"Argument `beta_1` must be >= 0 and < 1. Received: {beta_1}.")
        if beta_2 < 0.0 or beta_2 >= 1.0:
            # (TF's message shows beta_1 here)
            raise ValueError(f"Argument `beta_2` must be >= 0 and < 1. Received: {beta_1}.")
        if epsilon <= 0.0:
            raise ValueError(f"epsilon must be positive; got {epsilon}.")
        if not use_gradient_accumulation and not lazy_adam:
            raise ValueError(
                "When disabling lazy Adam (`lazy_adam=False`), "
                "gradient accumulation must be used. "
                "Set `use_gradient_accumulation` to False."
            )
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.lazy_adam = lazy_adam
        self.sum_inside_sqrt = sum_inside_sqrt

    def _slot_names(self):
        return ["momenta", "velocities"]

    def _slot_initializers(self):
        return [init_ops.Constant(0), init_ops.Constant(0)]


class CustomOptimizer(_Optimizer):
    """An optimizer given as a computation (for TPUEmbeddingV2), with its own slots.

    Raises:
      ValueError: slot names, initializers and dims of different lengths, or a slot
        dim other than 1 or 2.
    """

    def __init__(self, custom_computation, learning_rate=0.01, slot_names=None,
                 slot_initializers=None, hyperparameters=None, slot_dims=None):  # fmt: skip
        super().__init__(learning_rate, use_gradient_accumulation=False, clip_weight_min=None,
                         clip_weight_max=None, weight_decay_factor=None,
                         multiply_weight_decay_factor_by_learning_rate=None)  # fmt: skip
        self._slot_names_attr = tuple(slot_names or ())
        self._slot_initializers_attr = tuple(slot_initializers or ())
        self._slot_dims_attr = tuple(slot_dims or ())
        names = len(self._slot_names_attr)
        if names != len(self._slot_initializers_attr):
            raise ValueError(
                f"The number of slot_names ({names}) must match the number of "
                f"slot_initializers ({len(self._slot_initializers_attr)})."
            )
        if self._slot_dims_attr:
            if len(self._slot_dims_attr) != names:
                raise ValueError(
                    f"The number of slot_dims ({len(self._slot_dims_attr)}) must match "
                    f"the number of slot_names ({names})."
                )
            for name, dim in zip(self._slot_names_attr, self._slot_dims_attr):
                if dim not in (1, 2):
                    raise ValueError(
                        f"Unsupported slot dim '{dim}' for slot '{name}'. Only 1D and 2D "
                        "are supported."
                    )
        self._hyperparameters = tuple(hyperparameters or ())
        self._custom_computation = custom_computation

    def _slot_names(self):
        return list(self._slot_names_attr)

    def _slot_initializers(self):
        return list(self._slot_initializers_attr)

    @property
    def hyperparameters(self) -> tuple:
        return self._hyperparameters

    @property
    def custom_computation(self):
        return self._custom_computation

    @property
    def slot_dims(self) -> tuple:
        return self._slot_dims_attr


class CustomCombiner(_WithSlotVariables):
    """A combiner given as a computation over each sample's (up to `max_valency`)
    embeddings, with `num_weights` trainable weights.

    Raises:
      ValueError: weights without an initializer.
    """

    CUSTOM_COMBINER_SLOT_NAME = "custom_combiner_variables"

    def __init__(self, combiner_computation, max_valency, num_weights=0, initializer=None,
                 combiner_weights_learning_rate=0.01):  # fmt: skip
        super().__init__()
        self.combiner = f"custom_combiner_{hash(combiner_computation)}"
        self.combiner_computation = combiner_computation
        self.max_valency = max_valency
        self.num_weights = num_weights
        self.combiner_weights_learning_rate = combiner_weights_learning_rate
        if num_weights > 0 and initializer is None:
            raise ValueError("When `num_weights` is greater than 0, `initializer` must be set.")
        self._slot_names_attr = (self.CUSTOM_COMBINER_SLOT_NAME,)
        self._slot_initializers_attr = () if initializer is None else (initializer,)

    def _slot_names(self):
        return list(self._slot_names_attr) if self.num_weights > 0 else []

    def _slot_initializers(self):
        return list(self._slot_initializers_attr) if self.num_weights > 0 else []

    def __str__(self):
        return self.combiner


class QuantizationConfig:
    """Simulated quantization of a table's activations: `num_buckets` over
    [lower, upper].

    Raises:
      ValueError: fewer than 2 buckets.
    """

    def __init__(self, num_buckets: int, lower: float, upper: float):
        if num_buckets < 2:
            raise ValueError(
                f"num_buckets is {num_buckets}, must be at least 2 for simulated quantization."
            )
        self.num_buckets = num_buckets
        self.lower = lower
        self.upper = upper

    def __repr__(self):
        return (
            f"QuantizationConfig(num_buckets={self.num_buckets!r}, lower={self.lower!r}, "
            f"upper={self.upper!r})"
        )


class TableConfig:
    """One embedding table: `vocabulary_size` rows of `dim` values, its initializer
    (truncated normal, stddev 1/sqrt(dim), by default), optimizer and combiner.

    Raises:
      ValueError: a size or dim that is not a positive int, an initializer that is
        not callable, a combiner not in (mean, sum, sqrtn) nor a CustomCombiner, or a
        dtype other than float32 and int32.
    """

    def __init__(self, vocabulary_size: int, dim: int, initializer=None, optimizer=None,
                 combiner="mean", name=None, quantization_config=None, layout=None,
                 dtype=dtypes.float32):  # fmt: skip
        if not isinstance(vocabulary_size, int) or vocabulary_size < 1:
            raise ValueError(
                "Argument `vocabulary_size` must be an int and must be >= 1. "
                f"Received: {vocabulary_size}"
            )
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(
                "Argument `dim` (embedding dimension) must be an int and must be >= 1. "
                f"Received: {dim}"
            )
        if initializer is not None and not callable(initializer):
            raise ValueError(
                f"Argument `initializer` must be a callable (or None). Received: {initializer}"
            )
        if initializer is None:
            initializer = init_ops.TruncatedNormal(mean=0.0, stddev=1 / math.sqrt(dim))
        accepted = ("mean", "sum", "sqrtn")
        if isinstance(combiner, str):
            if combiner not in accepted:
                raise ValueError(
                    f"String argument `combiner` must be in {accepted}. Received: {combiner}"
                )
        elif not isinstance(combiner, CustomCombiner):
            raise ValueError(
                "Argument `combiner` should either be a str or a CustomCombiner. "
                f"Received: {type(combiner)}"
            )
        if dtype not in (dtypes.float32, dtypes.int32):
            raise ValueError(
                f"Argument `dtype` must be either float32 or int32. Received: {dtype}"
            )
        self.vocabulary_size = vocabulary_size
        self.dim = dim
        self.initializer = initializer
        self.optimizer = optimizer
        self.combiner = combiner
        self.name = name
        self.quantization_config = quantization_config
        self.layout = layout
        self.dtype = dtype

    def __repr__(self):
        initializer = self.initializer
        if (
            type(initializer) is init_ops.TruncatedNormal
            and initializer.mean == 0.0
            and math.isclose(initializer.stddev, 1 / math.sqrt(self.dim))
        ):
            initializer = None
        return (
            f"TableConfig(vocabulary_size={self.vocabulary_size!r}, dim={self.dim!r}, "
            f"initializer={initializer!r}, optimizer={self.optimizer!r}, "
            f"combiner={self.combiner!r}, name={self.name!r}, "
            f"quantization_config={self.quantization_config!r})"
        )


class RowIdInitializer:
    """Fills row i of a table with `offset + i`."""

    def __init__(self, offset: int = 0):
        self.offset = offset

    def __call__(self, shape, dtype):
        from asyncflow.ops import array_ops, reduction_ops

        rows = reduction_ops.range(self.offset, self.offset + shape[0], 1, dtype=dtype)
        return array_ops.expand_dims(rows, 1) * array_ops.ones(shape, dtype=dtype)


class FeatureConfig:
    """One feature looked up in `table`: a sequence of up to `max_sequence_length`
    ids when that is positive.

    Raises:
      ValueError: `table` is not a TableConfig, `max_sequence_length` is not an int
        >= 0, or `validate_weights_and_indices` is not a bool.
    """

    def __init__(self, table: TableConfig, max_sequence_length: int = 0,
                 validate_weights_and_indices: bool = True, output_shape=None,
                 name=None):  # fmt: skip
        if not isinstance(table, TableConfig):
            raise ValueError(
                f"Argument `table` has invalid type {type(table)}. "
                "Expected `tf.tpu.experimental.embedding.TableConfig`."
            )
        if not isinstance(max_sequence_length, int) or max_sequence_length < 0:
            raise ValueError(
                "Argument `max_sequence_length` must be an int and must be >= 0. "
                f"Received: {max_sequence_length}"
            )
        self.table = table
        self.max_sequence_length = max_sequence_length
        self.name = name
        self.output_shape = TensorShape(output_shape)
        if not isinstance(validate_weights_and_indices, bool):
            raise ValueError(
                "Argument `validate_weights_and_indices` must be a boolean. "
                f"Received: {validate_weights_and_indices}"
            )
        self.validate_weights_and_indices = validate_weights_and_indices

    def __repr__(self):
        return (
            f"FeatureConfig(table={self.table!r}, "
            f"max_sequence_length={self.max_sequence_length!r}, "
            f"validate_weights_and_indices={self.validate_weights_and_indices!r}, "
            f"output_shape={self.output_shape!r}, name={self.name!r})"
        )


@dataclasses.dataclass(frozen=True)
class SparseCoreEmbeddingConfig:
    """How TPUEmbeddingV2 lays tables out on SparseCores."""

    disable_table_stacking: bool = False
    max_ids_per_chip_per_sample: int = 64
    max_ids_per_table: dict | None = None
    max_unique_ids_per_table: dict | None = None
    allow_id_dropping: bool = False
    initialize_tables_on_host: bool = True
    enable_fast_table_initialization: bool = False
