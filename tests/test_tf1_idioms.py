"""tf.logging, tf.app.run, tf.flags and tf.compat.v1 as TF1 scripts use them.

Expected values were checked against TensorFlow 2.21's tf.compat.v1 (absl flags):
`--n=0x10 --nob pos --unknown=4 --l=c,d -e y` gives main
`[prog, 'pos', '--unknown=4']`, n=16, b=False, l=['c', 'd'], e='y'; a bad integer
raises IllegalFlagValueError; the verbosity is WARN (30) before app.run, INFO inside.
The multi-flag and flag-file cases' expected values are absl 2.x's (TF 2.21's venv) for
the same definitions, argv and files.
"""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import asyncflow as af
from asyncflow import flags as flags_mod


@pytest.fixture
def fv():
    values = flags_mod.FlagValues()
    flags_mod.DEFINE_integer("n", 3, "an int", flag_values=values)
    flags_mod.DEFINE_boolean("b", True, "a bool", flag_values=values)
    flags_mod.DEFINE_list("l", "a,b", "a list", flag_values=values)
    flags_mod.DEFINE_enum("e", "x", ["x", "y"], "an enum", flag_values=values)
    flags_mod.DEFINE_string("s", None, "a string", flag_values=values)
    flags_mod.DEFINE_float("f", 0.5, "a float", flag_values=values)
    return values


def test_flags_parse_as_absl(fv):
    argv = ["prog", "--n=0x10", "--nob", "pos", "--unknown=4", "--l=c,d", "-e", "y"]
    rest = fv(argv, known_only=True)
    assert rest == ["prog", "pos", "--unknown=4"]
    assert (fv.n, fv.b, fv.l, fv.e, fv.s, fv.f) == (16, False, ["c", "d"], "y", None, 0.5)
    assert fv.flag_values_dict()["n"] == 16


def test_flags_defaults_and_errors(fv):
    with pytest.raises(flags_mod.UnparsedFlagAccessError):
        _ = fv.n
    with pytest.raises(flags_mod.IllegalFlagValueError):
        fv(["prog", "--n=abc"])
    with pytest.raises(flags_mod.IllegalFlagValueError):
        fv(["prog", "--e=z"])
    with pytest.raises(flags_mod.UnrecognizedFlagError):
        fv(["prog", "--nope=1"])
    with pytest.raises(flags_mod.DuplicateFlagError):
        flags_mod.DEFINE_integer("n", 1, "again", flag_values=fv)
    fv(["prog", "--s", "text", "--f=2.5", "--b=false", "--", "--n=7"])
    assert (fv.s, fv.f, fv.b, fv.n) == ("text", 2.5, False, 3)
    fv.n = 9
    assert fv.n == 9
    assert issubclass(flags_mod.IllegalFlagValueError, flags_mod.Error)


def test_required_flag(fv):
    flags_mod.mark_flag_as_required("s", flag_values=fv)
    with pytest.raises(flags_mod.IllegalFlagValueError):
        fv(["prog"])


@pytest.fixture
def multi():
    values = flags_mod.FlagValues()
    flags_mod.DEFINE_string("s", "d", "h", flag_values=values)
    flags_mod.DEFINE_multi_string("ms", ["a"], "h", flag_values=values)
    flags_mod.DEFINE_multi_integer("mi", 1, "h", lower_bound=0, flag_values=values)
    flags_mod.DEFINE_multi_float("mf", [0.5, 1.5], "h", flag_values=values)
    flags_mod.DEFINE_multi_enum("me", ["x"], ["x", "y", "Z"], "h", flag_values=values)
    flags_mod.DEFINE_multi_enum(
        "mec", None, ["x", "Y"], "h", case_sensitive=False, flag_values=values
    )
    return values


def test_multi_flags_as_absl(multi):
    """Values as absl 2.x (TF 2.21's tf.compat.v1.flags) gives them for the same argv."""
    fv = multi
    assert [fv[n].default for n in ("ms", "mi", "mf", "me", "mec")] == [
        ["a"],
        [1],
        [0.5, 1.5],
        ["x"],
        None,
    ]
    rest = fv(
        ["prog", "--ms=b", "--ms", "c", "--mi=3", "--mi=0x10", "--mf=2", "--me=y",
         "--me=Z", "--mec=y", "--mec=X", "pos"]
    )  # fmt: skip
    assert rest == ["prog", "pos"]
    assert (fv.ms, fv.mi, fv.mf, fv.me, fv.mec) == (
        ["b", "c"], [3, 16], [2.0], ["y", "Z"], ["Y", "x"],
    )  # fmt: skip
    fv.unparse_flags()
    fv(["prog"])
    assert fv.ms == ["a"] and fv.mi == [1]  # defaults while absent
    for bad in (["p", "--mi=-1"], ["p", "--me=q"], ["p", "--mf=x"]):
        fv.unparse_flags()
        with pytest.raises(flags_mod.IllegalFlagValueError):
            fv(bad)


def test_flag_files_as_absl(multi, tmp_path):
    """--flagfile lines stand where the directive stands (later flags win); comments,
    blank lines and nested files as absl; positional lines are arguments."""
    inner = tmp_path / "inner.txt"
    inner.write_text("--mi=7\n--ms=f2\n")
    outer = tmp_path / "outer.txt"
    outer.write_text(
        f"# comment\n// another\n\n--s=from_file\n  --ms=f1  \n--flagfile={inner}\n"
        f"--flagfile={tmp_path / 'outer.txt'}\npositional_in_file\n"
    )
    fv = multi
    rest = fv(["prog", f"--flagfile={outer}", "--ms=cli", "pos2"])
    assert rest == ["prog", "positional_in_file", "pos2"]
    assert (fv.s, fv.ms, fv.mi) == ("from_file", ["f1", "f2", "cli"], [7])
    fv.unparse_flags()
    rest = fv(["prog", "--ms=cli", "--flagfile", str(outer), "--s=last"])
    assert rest == ["prog", "positional_in_file"]
    assert (fv.s, fv.ms, fv.mi) == ("last", ["cli", "f1", "f2"], [7])
    fv.unparse_flags()
    assert fv(["prog", "--", f"--flagfile={outer}"]) == ["prog", f"--flagfile={outer}"]
    with pytest.raises(flags_mod.CantOpenFlagFileError, match="Unable to open flagfile"):
        fv(["prog", f"--flagfile={tmp_path / 'missing'}"])
    with pytest.raises(flags_mod.IllegalFlagValueError, match="--flagfile with no argument"):
        fv(["prog", "--flagfile"])
    assert issubclass(flags_mod.CantOpenFlagFileError, flags_mod.Error)
    assert af.flags.DEFINE_multi_string is flags_mod.DEFINE_multi_string


def test_global_flags_parse_sys_argv_on_first_read(monkeypatch):
    # TF 2.21: the first read parses sys.argv in full, so an unknown flag raises there.
    values = flags_mod._AutoParsingFlagValues()
    flags_mod.DEFINE_integer("steps", 1, "steps", flag_values=values)
    monkeypatch.setattr("sys.argv", ["prog", "--steps=12", "rest"])
    assert values.steps == 12
    values = flags_mod._AutoParsingFlagValues()
    flags_mod.DEFINE_integer("steps", 1, "steps", flag_values=values)
    monkeypatch.setattr("sys.argv", ["prog", "--steps=12", "--other"])
    with pytest.raises(flags_mod.UnrecognizedFlagError, match="Unknown command line flag 'other'"):
        _ = values.steps


def test_old_keyword_names(caplog):
    values = flags_mod.FlagValues()
    with caplog.at_level(logging.WARNING):
        flags_mod.DEFINE_string(
            flag_name="old", default_value="d", docstring="h", flag_values=values
        )
    values(["prog"])
    assert values.old == "d"
    assert "Use of the keyword argument names (flag_name, default_value, docstring)" in (
        caplog.text
    )


_APP_SCRIPT = """
import sys
import asyncflow as tf
tf.flags.DEFINE_integer("k", 1, "the k")
FLAGS = tf.flags.FLAGS
def main(argv):
    print("argv", argv[1:], "k", FLAGS.k, "v", tf.logging.get_verbosity())
    return 3
tf.app.run(main)
"""


def _run_app(tmp_path, *args):
    script = tmp_path / "app_script.py"
    script.write_text(_APP_SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=60
    )


def test_app_run_calls_main_with_unparsed_args(tmp_path):
    # tf.app.run is absl's app.run (once per process): run as a script.
    r = _run_app(tmp_path, "--k=4", "left", "--unknown")
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "argv ['left', '--unknown'] k 4 v 20"
    # A value that does not parse: the parser's IllegalFlagValueError ends the program
    # (TF 2.21's tolerant parser is not absl's usage-printing one).
    r = _run_app(tmp_path, "--k=x")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "absl.flags._exceptions.IllegalFlagValueError: flag --k=x: invalid literal for int() "
        "with base 10: 'x'"
    )
    r = _run_app(tmp_path, "--help")
    assert r.returncode == 1  # absl's usage exit, as TF 2.21
    assert "--k: the k" in r.stdout and "(default: '1')" in r.stdout


def test_logging_levels_and_every_n(caplog, monkeypatch):
    logger = af.logging.get_logger()
    monkeypatch.setattr(logger, "level", logger.level)
    assert (af.logging.DEBUG, af.logging.INFO, af.logging.WARN) == (10, 20, 30)
    assert (af.logging.ERROR, af.logging.FATAL) == (40, 50)
    af.logging.set_verbosity(af.logging.INFO)
    assert af.logging.get_verbosity() == af.logging.INFO
    with caplog.at_level(logging.INFO, logger="asyncflow"):
        for i in range(7):
            af.logging.log_every_n(af.logging.INFO, "every %d", 3, i)
        for i in range(5):
            af.logging.log_first_n(af.logging.WARN, "first %d", 2, i)
        af.logging.debug("hidden")
        af.logging.info("shown %s", "x")
        af.logging.warn("warned")
        af.logging.log_if(af.logging.ERROR, "if %d", False, 1)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["every 0", "every 3", "every 6", "first 0", "first 1", "shown x", "warned"]
    # Library loggers below `asyncflow` obey the same verbosity.
    af.logging.set_verbosity(af.logging.ERROR)
    assert not logging.getLogger("asyncflow.train").isEnabledFor(logging.INFO)


def test_compat_v1_is_asyncflow():
    tf = af.compat.v1
    assert tf is af
    tf.disable_v2_behavior()
    tf.disable_eager_execution()
    assert tf.executing_eagerly() is False
    assert tf.logging is af.logging and tf.flags.FLAGS is af.flags.FLAGS


def test_flag_errors_say_absls_words():
    # What absl (behind tf.compat.v1.flags) says, recorded with TF 2.21.
    fv = flags_mod.FlagValues()
    flags_mod.DEFINE_integer("n", 3, "an int", lower_bound=0, flag_values=fv)
    flags_mod.DEFINE_integer("k", 3, "bounded", lower_bound=1, upper_bound=5, flag_values=fv)
    flags_mod.DEFINE_float("f", -0.5, "a float", upper_bound=0, flag_values=fv)
    with pytest.raises(flags_mod.IllegalFlagValueError, match="^flag --n=-1: -1 is not a non-neg"):
        fv(["prog", "--n=-1"])
    with pytest.raises(flags_mod.IllegalFlagValueError, match=r"in the range \[1, 5\]$"):
        fv(["prog", "--k=9"])
    with pytest.raises(flags_mod.IllegalFlagValueError, match="is not a non-positive number$"):
        fv(["prog", "--f=2"])
    with pytest.raises(flags_mod.IllegalFlagValueError, match="with base 10: 'abc'$"):
        fv(["prog", "--n=abc"])
    fv(["prog", "--n=010", "--k=0x3"])  # base 10 unless 0x/0o/0b
    assert (fv.n, fv.k) == (10, 3)
    want = (
        "^The flag 'n' is defined twice. First from test_tf1_idioms, second from "
        "test_tf1_idioms. Description from first occurrence: an int$"
    )
    with pytest.raises(flags_mod.DuplicateFlagError, match=want):
        flags_mod.DEFINE_integer("n", 1, "again", flag_values=fv)


def test_app_flags_is_tf_flags():
    # TF 2.21: `tf.compat.v1.app.flags is tf.compat.v1.flags` (the TF1 spelling
    # `FLAGS = tf.app.flags.FLAGS`)
    assert af.app.flags is af.flags
    assert af.app.flags.FLAGS is af.flags.FLAGS
    assert af.app.flags.DEFINE_string is af.flags.DEFINE_string
