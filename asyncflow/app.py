"""`af.app.run`: TF1's `tf.app.run`, which is absl's `app.run` parsing flags with unknown
ones tolerated.

absl's runner handles `--help`/`--helpfull`/`--only_check_args`, installs absl's
logging handler, calls `main(argv)` with argv[0] and the arguments no flag consumed (an
undefined `--flag` is passed on to main rather than refused), and exits with main's
result.  A value that does not parse raises absl's IllegalFlagValueError out of `run`,
as TF's tolerant parser lets it.
"""

from __future__ import annotations

import sys

from asyncflow import flags
from asyncflow import tf_logging as _logging

# `tf.app.flags` is `tf.flags` (TF1 scripts spell it `FLAGS = tf.app.flags.FLAGS`)
__all__ = ["run", "flags"]


def _parse_known(argv):
    return flags.FLAGS(argv, known_only=True)


def run(main=None, argv=None):
    """Run `main` (default: `sys.modules['__main__'].main`) through absl's runner and
    exit with its result.

    Raises:
      SystemExit: always, main's return value as the status.
    """
    from absl import app as absl_app  # only scripts that call run pay for its import

    main = main or sys.modules["__main__"].main

    def started(args):
        _logging._app_started()
        return main(args)

    absl_app.run(started, argv=argv, flags_parser=_parse_known)
