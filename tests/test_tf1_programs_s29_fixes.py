"""Fixes found by the session-29 TF1 programs that their recorded results do not show:
tf.global_variables_initializer, tf.local_variables_initializer and tf.global_variables
are current endpoints (no notice, allowed in strict mode) although their deprecated
spellings are the same functions.  Results recorded from TF 2.21 (tf.compat.v1, graph
mode, after tf.experimental.enable_strict_mode())."""

import pytest

import asyncflow as tf

# name -> the error class TF 2.21 raises in strict mode (None: it runs)
_TF_STRICT = {
    "global_variables_initializer": None,
    "local_variables_initializer": None,
    "global_variables": None,
    "initialize_all_variables": "RuntimeError",
    "initialize_local_variables": "RuntimeError",
    "all_variables": "RuntimeError",
}


@pytest.fixture
def strict_mode():
    """Strict mode on, no notice given yet; the process's state back afterwards."""
    from asyncflow import deprecation

    given, strict = set(deprecation._GIVEN), deprecation._STRICT[0]
    deprecation._GIVEN.clear()
    tf.experimental.enable_strict_mode()
    yield
    deprecation._GIVEN.clear()
    deprecation._GIVEN.update(given)
    deprecation._STRICT[0] = strict


@pytest.mark.parametrize("name", list(_TF_STRICT))
def test_variable_initializer_aliases_in_strict_mode_match_tf(strict_mode, name):
    with tf.Graph().as_default():
        tf.Variable(1.0)
        try:
            getattr(tf, name)()
            got = None
        except Exception as exc:  # noqa: BLE001 - the class name is the result
            got = type(exc).__name__
    assert got == _TF_STRICT[name]
