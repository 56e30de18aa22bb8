"""`af.logging`: TF1's `tf.logging` (tf_logging) on the standard `logging` module.

Everything logs through the `asyncflow` logger, so `set_verbosity` also governs the
library's own loggers below it (`asyncflow.train`, ...).  As in TF, the level starts at
WARN until `set_verbosity` changes it (or `app.run` starts, which makes it INFO), and
the `*_every_n` / `*_first_n` helpers count calls per call site (file and line).
"""

from __future__ import annotations

import logging as _logging
import sys
import threading

__all__ = [
    "DEBUG",
    "INFO",
    "WARN",
    "ERROR",
    "FATAL",
    "TaskLevelStatusMessage",
    "debug",
    "error",
    "fatal",
    "flush",
    "get_logger",
    "get_verbosity",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "log_if",
    "set_verbosity",
    "vlog",
    "warn",
    "warning",
]

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_logger: _logging.Logger | None = None
_level_chosen = False  # set_verbosity called (app.run then leaves the level alone)
_lock = threading.Lock()
_counts: dict[tuple, int] = {}


def get_logger() -> _logging.Logger:
    """The `asyncflow` logger: WARN and a stderr handler unless the application set them."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            logger = _logging.getLogger("asyncflow")
            if logger.level == _logging.NOTSET:
                logger.setLevel(WARN)
            if not logger.handlers and not _logging.getLogger().handlers:
                handler = _logging.StreamHandler(sys.stderr)
                handler.setFormatter(_logging.Formatter(_logging.BASIC_FORMAT, None))
                logger.addHandler(handler)
            _logger = logger
    return _logger


def _at_caller(kwargs: dict) -> dict:
    # Records name the script's line, not this module's.
    kwargs.setdefault("stacklevel", 2)
    return kwargs


def log(level: int, msg, *args, **kwargs) -> None:
    get_logger().log(level, msg, *args, **_at_caller(kwargs))


def debug(msg, *args, **kwargs) -> None:
    get_logger().debug(msg, *args, **_at_caller(kwargs))


def info(msg, *args, **kwargs) -> None:
    get_logger().info(msg, *args, **_at_caller(kwargs))


def warning(msg, *args, **kwargs) -> None:
    get_logger().warning(msg, *args, **_at_caller(kwargs))


warn = warning


def error(msg, *args, **kwargs) -> None:
    get_logger().error(msg, *args, **_at_caller(kwargs))


def fatal(msg, *args, **kwargs) -> None:
    get_logger().fatal(msg, *args, **_at_caller(kwargs))


def vlog(level: int, msg, *args, **kwargs) -> None:
    get_logger().log(level, msg, *args, **_at_caller(kwargs))


def flush() -> None:
    for handler in get_logger().handlers:
        handler.flush()


def get_verbosity() -> int:
    return get_logger().getEffectiveLevel()


def set_verbosity(v: int) -> None:
    global _level_chosen
    _level_chosen = True
    get_logger().setLevel(v)


def _app_started() -> None:
    """`app.run` turns INFO on, as absl's does, unless the script chose a level."""
    if not _level_chosen:
        get_logger().setLevel(INFO)


def _call_site_count(depth: int = 2) -> int:
    """How many times the calling line has asked before (0 the first time)."""
    frame = sys._getframe(depth)
    key = (frame.f_code.co_filename, frame.f_lineno)
    with _lock:
        count = _counts.get(key, 0)
        _counts[key] = count + 1
    return count


def log_if(level: int, msg, condition, *args) -> None:
    """Log `msg % args` at `level` if `condition` holds."""
    if condition:
        get_logger().log(level, msg, *args, stacklevel=3)


def log_every_n(level: int, msg, n: int, *args) -> None:
    """Log on this call site's 1st, (n+1)th, (2n+1)th... call."""
    count = _call_site_count()
    log_if(level, msg, not (count % n), *args)


def log_first_n(level: int, msg, n: int, *args) -> None:
    """Log on this call site's first `n` calls only."""
    count = _call_site_count()
    log_if(level, msg, count < n, *args)


class TaskLevelStatusMessage:
    """TF's status-message stub: a context manager that logs nothing."""

    def __init__(self, msg):
        self._msg = msg

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
