"""`import asyncflow` leaves its heavy, rarely used subpackages unimported until a
program reads them (PEP 562), and reading them gives what an eager import gave: the
same modules under every spelling, dir(tf) listing them, deprecation notices in place.

One fresh interpreter does it all (an import of asyncflow costs seconds on CI)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

LAZY = ("estimator", "keras", "lite", "profiler", "tpu", "tfprof", "tfprof_logger")

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import asyncflow as tf

    lazy = %r
    out = {"loaded_at_import": [n for n in lazy if "asyncflow." + n in sys.modules]}
    out["in_dir"] = [n for n in lazy if n in dir(tf)]
    out["in_compat_dir"] = [n for n in lazy if n in dir(tf.compat.v1)]
    out["hidden"] = [n for n in ("__getattr__", "__dir__") if n in dir(tf)]
    # the lookups, each spelling
    out["dense"] = tf.keras.layers.Dense(3).units
    from asyncflow.keras import layers as keras_layers
    from asyncflow import estimator
    out["same"] = [
        keras_layers is tf.keras.layers,
        tf.compat.v1.keras is tf.keras,
        estimator is tf.estimator,
        getattr(tf, "lite") is sys.modules["asyncflow.lite"],
        hasattr(tf, "tpu"),
    ]
    out["estimator"] = tf.estimator.Estimator.__name__
    out["lite"] = tf.lite.TFLiteConverter.__name__
    out["profiler"] = tf.profiler.ProfileOptionBuilder.__name__
    out["loaded_after"] = [n for n in lazy if "asyncflow." + n in sys.modules]
    try:
        tf.no_such_name
    except AttributeError as e:
        out["missing"] = str(e)
    # an endpoint TF marks deprecated still gives its notice (tf_logging's logger)
    import logging
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("asyncflow").addHandler(handler)
    tf.to_float(tf.constant(1))
    out["deprecated"] = [r.getMessage() for r in records if "tf.cast" in r.getMessage()] != []
    print(json.dumps(out))
    """
)


def test_lazy_subpackages_not_imported_until_read():
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT % (LAZY,)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loaded_at_import"] == []
    assert out["in_dir"] == list(LAZY)
    assert out["in_compat_dir"] == list(LAZY)
    assert out["hidden"] == []
    assert out["dense"] == 3
    assert out["same"] == [True] * 5
    assert out["estimator"] == "Estimator"
    assert out["lite"] == "TFLiteConverter"
    assert out["profiler"] == "ProfileOptionBuilder"
    assert set(out["loaded_after"]) >= {"estimator", "keras", "lite", "profiler", "tpu"}
    assert out["missing"] == "module 'asyncflow' has no attribute 'no_such_name'"
    assert out["deprecated"] is True
