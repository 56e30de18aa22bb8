"""The options of cross-worker collectives (`tf.distribute.experimental`'s
CommunicationImplementation, CommunicationOptions and the older CollectiveHints) and
`tf.distribute.RunOptions`.  Plain values: the strategies read their fields.
"""

from __future__ import annotations

import collections
import enum

__all__ = [
    "CollectiveCommunication",
    "CollectiveHints",
    "CommunicationImplementation",
    "CommunicationOptions",
    "Options",
    "RunOptions",
]


class CommunicationImplementation(enum.Enum):
    """Which all-reduce implementation collectives use (AUTO lets the runtime pick)."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


CollectiveCommunication = CommunicationImplementation  # (the TF 2.2 name)


class Options:
    """What `CommunicationOptions(...)` returns: how a batch of collectives runs.

    Raises:
      ValueError: a negative `bytes_per_pack`, or an `implementation` that is not a
        CommunicationImplementation (or the name of one).
    """

    def __init__(
        self,
        bytes_per_pack=0,
        timeout_seconds=None,
        implementation=CommunicationImplementation.AUTO,
    ):
        if bytes_per_pack < 0:
            raise ValueError(f"Argument `bytes_per_pack` must be >=0, Received {bytes_per_pack}.")
        if isinstance(implementation, str):
            implementation = CommunicationImplementation(implementation.upper())
        if not isinstance(implementation, CommunicationImplementation):
            raise ValueError(
                "Argument `implementation` must be instance of "
                "`tf.distribute.experimental.CommunicationImplementation`."
            )
        self.bytes_per_pack = bytes_per_pack
        self.timeout_seconds = timeout_seconds
        self.implementation = implementation

    def merge(self, options: Options | None) -> Options:
        """A copy of these options with `options`' non-default fields taking their
        place."""
        merged = Options(self.bytes_per_pack, self.timeout_seconds, self.implementation)
        if options is None:
            return merged
        if options.bytes_per_pack != 0:
            merged.bytes_per_pack = options.bytes_per_pack
        if options.timeout_seconds is not None:
            merged.timeout_seconds = options.timeout_seconds
        if options.implementation != CommunicationImplementation.AUTO:
            merged.implementation = options.implementation
        return merged

    def __str__(self) -> str:
        return (
            f"Options(bytes_per_pack={self.bytes_per_pack},timeout_seconds="
            f"{self.timeout_seconds}, implementation={self.implementation})"
        )


class CommunicationOptions:
    """`tf.distribute.experimental.CommunicationOptions(...)`: makes an Options (the
    class users name is not the class of what they get, as in TF)."""

    def __new__(cls, *args, **kwargs) -> Options:
        return Options(*args, **kwargs)


class Hints:
    """`CollectiveHints(...)`, the older spelling of CommunicationOptions (without
    `implementation`): makes an Options.

    Raises:
      ValueError: a negative `bytes_per_pack`.
    """

    def __new__(cls, bytes_per_pack=0, timeout_seconds=None) -> Options:
        return Options(bytes_per_pack, timeout_seconds)


CollectiveHints = Hints


class RunOptions(
    collections.namedtuple(
        "RunOptions",
        [
            "experimental_enable_dynamic_batch_size",
            "experimental_bucketizing_dynamic_shape",
            "experimental_xla_options",
        ],
    )
):
    """Options of `strategy.run` (only TPU strategies read them)."""

    def __new__(
        cls,
        experimental_enable_dynamic_batch_size=True,
        experimental_bucketizing_dynamic_shape=False,
        experimental_xla_options=None,
    ):
        return super().__new__(
            cls,
            experimental_enable_dynamic_batch_size,
            experimental_bucketizing_dynamic_shape,
            experimental_xla_options,
        )
