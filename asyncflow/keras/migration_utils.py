"""`tf.keras.utils.DeterministicRandomTestTool` and `StepsPerExecutionTuner`.

DeterministicRandomTestTool: random ops made inside its `scope()` take op seeds that
depend only on the tool (not on the rest of the graph), so a TF1 graph and its rewrite
can be checked to draw the same numbers.

`scope()` sets the default graph's seed to the tool's `seed` and, while its context is
entered, answers every `random_seed.get_seed` request (the op seed asked for is
ignored) with `(seed, operation_seed)`:
- mode "constant": the same `operation_seed` every time (the graph seed is set to it
  too, as Keras does, so random ops made after the scope see that graph seed);
- mode "num_random_ops": `operation_seed` then counts up, one per random op; handing
  out a seed twice raises ValueError.
"""

from __future__ import annotations

import threading
from unittest import mock

from asyncflow import random_seed

__all__ = ["DeterministicRandomTestTool", "StepsPerExecutionTuner"]


class DeterministicRandomTestTool:
    """Deterministic op seeds for the random ops made in `scope()` (module docstring).

    Raises:
      ValueError: (constructor) `mode` is neither "constant" nor "num_random_ops";
        (in "num_random_ops" scope) an operation seed handed out already.
    """

    def __init__(self, seed: int = 42, mode="constant"):
        if mode not in {"constant", "num_random_ops"}:
            raise ValueError(f"Mode arg must be 'constant' or 'num_random_ops'. Got: {mode}")
        self._mode = mode
        self._seed = seed
        self.operation_seed = 0
        self._observed_seeds: set = set()

    def _get_seed(self, _op_seed):
        op_seed = self.operation_seed
        if self._mode == "constant":
            random_seed.set_random_seed(op_seed)
        else:
            if op_seed in self._observed_seeds:
                raise ValueError(
                    "This `DeterministicRandomTestTool` object is trying to re-use the "
                    f"already-used operation seed {op_seed}. It cannot guarantee random "
                    "numbers will match between eager and sessions when an operation seed "
                    "is reused. You most likely set `operation_seed` explicitly but used a "
                    "value that caused the naturally-incrementing operation seed sequences "
                    "to overlap with an already-used seed."
                )
            self._observed_seeds.add(op_seed)
            self.operation_seed += 1
        return self._seed, op_seed

    def scope(self):
        """Sets the graph seed now; the returned context manager hands out the tool's
        seeds while entered."""
        random_seed.set_random_seed(self._seed)
        return mock.patch.object(random_seed, "get_seed", wraps=self._get_seed)


class StepsPerExecutionTuner:
    """Keras' tuner of a steps-per-execution variable from the optimizer's measured
    throughput.  It reads variables eagerly (`numpy()`), so in graph mode -- the only
    mode asyncflow has -- `start()` raises as TF's graph mode does; the rest (the
    variable, its setter, `stop()`) behaves as Keras'.

    Raises:
      NotImplementedError (start): graph mode has no eager `numpy()`.
    """

    def __init__(
        self, optimizer, spe_variable, interval=5, change_spe_interval=10, change_threshold=0.1
    ):
        self.optimizer = optimizer
        self._steps_per_execution = spe_variable
        self.interval = interval
        self.change_spe_interval = change_spe_interval
        self.spe_change_threshold = change_threshold
        self.steps_per_execution_stop_event = threading.Event()
        self.thread = None

    def start(self):
        if self.thread and self.thread.is_alive():
            return self.thread
        raise NotImplementedError("numpy() is only available when eager execution is enabled.")

    @property
    def steps_per_execution(self):
        return self._steps_per_execution

    @steps_per_execution.setter
    def steps_per_execution(self, value):
        # As in TF's graph mode: the assign op is made, not run.
        self._steps_per_execution.assign(value)
        self.init_spe = value

    def stop(self) -> None:
        self.steps_per_execution_stop_event.set()
