"""`af.flags` (also `af.app.flags`): TF1's `tf.flags`, which is absl's flags module.

TF1 re-exports `absl.flags` with two changes, made here too: the global `FLAGS` parses
`sys.argv` the first time a flag is read before any explicit parse (absl would raise
`UnparsedFlagAccessError`), and `DEFINE_string/boolean/bool/float/integer` also take
the old keyword names `flag_name`, `default_value` and `docstring`, with a deprecation
warning.  absl.logging's flags (`--logtostderr`, `--verbosity`, ...), which TF defines
by importing absl.logging, are defined here when flags are first parsed.  Everything
else (every `DEFINE_*`, parsers, serializers, validators, `--flagfile`, `--help`, the
error classes) is absl's own, so a TF1 script's flags parse, fail and print exactly as
under TensorFlow.
"""

from __future__ import annotations

import functools
import logging
import sys

from absl import flags as _absl
from absl.flags import *  # noqa: F403  (TF1's tf.flags is absl's module, re-exported)

# Flags defined through the wrappers below belong to the caller's module, not this one
# (absl attributes a flag to the module that called DEFINE_*).
_absl.disclaim_key_flags()


def _define_logging_flags(flag_values) -> None:
    """absl.logging's flags (--logtostderr, --verbosity, ...), which TF1's command lines
    may carry, when the global FLAGS (where they live) is parsed: importing absl.logging
    defines them.  Not earlier, since the import also makes absl's logging handler,
    which keeps the stderr of that moment."""
    if flag_values is _absl.FLAGS:
        from absl import logging  # noqa: F401


_OLD_KEYWORDS = {"flag_name": "name", "default_value": "default", "docstring": "help"}


def _accept_old_keywords(define):
    @functools.wraps(define)
    def wrapper(*args, **kwargs):
        old = [k for k in _OLD_KEYWORDS if k in kwargs]
        for k in old:
            kwargs[_OLD_KEYWORDS[k]] = kwargs.pop(k)
        if old:
            logging.warning(
                "Use of the keyword argument names (flag_name, default_value, docstring) is "
                "deprecated, please use (name, default, help) instead."
            )
        return define(*args, **kwargs)

    return wrapper


DEFINE_string = _accept_old_keywords(_absl.DEFINE_string)
DEFINE_boolean = _accept_old_keywords(_absl.DEFINE_boolean)
DEFINE_bool = DEFINE_boolean
DEFINE_float = _accept_old_keywords(_absl.DEFINE_float)
DEFINE_integer = _accept_old_keywords(_absl.DEFINE_integer)


class _AutoParsingFlagValues:
    """A `FlagValues` that parses `sys.argv` when a flag is first read before any parse
    (TF1 scripts read `FLAGS.x` at module level or without `app.run`); an unknown flag
    then raises UnrecognizedFlagError, as in TF."""

    def __init__(self, wrapped=None):
        self.__dict__["_wrapped"] = _absl.FlagValues() if wrapped is None else wrapped

    def __getattribute__(self, name):
        if name == "__dict__":
            return super().__getattribute__(name)
        # FlagValues' own attributes; a flag's value falls through to __getattr__.
        return self.__dict__["_wrapped"].__getattribute__(name)

    def __getattr__(self, name):
        wrapped = self.__dict__["_wrapped"]
        if not wrapped.is_parsed():
            _define_logging_flags(wrapped)
            wrapped(sys.argv)
        return getattr(wrapped, name)

    def __setattr__(self, name, value):
        setattr(self.__dict__["_wrapped"], name, value)

    def __delattr__(self, name):
        delattr(self.__dict__["_wrapped"], name)

    def __dir__(self):
        return dir(self.__dict__["_wrapped"])

    def __getitem__(self, name):
        return self.__dict__["_wrapped"][name]

    def __setitem__(self, name, flag):
        self.__dict__["_wrapped"][name] = flag

    def __contains__(self, name):
        return name in self.__dict__["_wrapped"]

    def __len__(self):
        return len(self.__dict__["_wrapped"])

    def __iter__(self):
        return iter(self.__dict__["_wrapped"])

    def __str__(self):
        return str(self.__dict__["_wrapped"])

    def __call__(self, *args, **kwargs):
        _define_logging_flags(self.__dict__["_wrapped"])
        return self.__dict__["_wrapped"](*args, **kwargs)


FLAGS = _AutoParsingFlagValues(_absl.FLAGS)
