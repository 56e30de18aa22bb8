"""`af.app.run`: TF1's `tf.app.run` — parse the flags, call `main(argv)`, exit with its result.

`main` receives argv[0] followed by the arguments no flag consumed; as in TF1 (which
parses with `known_only=True`), an undefined `--flag` is passed on to main rather than
refused.  A value that does not parse raises IllegalFlagValueError, as TF's.
"""

from __future__ import annotations

import sys

from asyncflow import flags
from asyncflow import flags as _flags
from asyncflow import tf_logging as _logging

# `tf.app.flags` is `tf.flags` (TF1 scripts spell it `FLAGS = tf.app.flags.FLAGS`)
__all__ = ["run", "flags"]


def run(main=None, argv=None):
    """Run `main` (default: `sys.modules['__main__'].main`) and exit with its result.

    Raises:
      SystemExit: always, main's return value as the status.
      flags.IllegalFlagValueError: a flag's value does not parse.
    """
    args = sys.argv if argv is None else argv
    rest = _flags.FLAGS(args, known_only=True)
    _logging._app_started()
    main = main or sys.modules["__main__"].main
    sys.exit(main(rest))
