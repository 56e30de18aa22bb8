"""`import asyncflow` leaves its heavy, rarely used subpackages unimported until a
program reads them (PEP 562), and reading them gives what an eager import gave: the
same modules under every spelling, dir(tf) listing them, deprecation notices in place.

One fresh interpreter does it all (an import of asyncflow costs seconds on CI)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# x = [1, 2, 3]; InplaceAdd(x, i=[1], v=[10]) (array_extra_ops, a lazy family)
_GRAPH_DEF = """
node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }
  float_val: 1 float_val: 2 float_val: 3 } } } }
node { name: "i" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } }
  int_val: 1 } } } }
node { name: "v" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 } }
  float_val: 10 } } } }
node { name: "add" op: "InplaceAdd" input: "x" input: "i" input: "v"
  attr { key: "T" value { type: DT_FLOAT } } }
"""

LAZY = ("estimator", "keras", "lite", "profiler", "tpu", "tfprof", "tfprof_logger", "app", "flags")

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import asyncflow as tf

    lazy = %r
    out = {"loaded_at_import": [n for n in lazy if "asyncflow." + n in sys.modules]}
    out["absl_at_import"] = "absl.flags" in sys.modules
    from asyncflow.ops import lazy_index

    families = ["asyncflow.ops." + f for f in lazy_index.FAMILIES]
    out["families_at_import"] = [f for f in families if f in sys.modules]
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
    out["flags"] = [tf.app.flags is tf.flags, tf.flags.FLAGS is tf.compat.v1.flags.FLAGS]
    out["loaded_after"] = [n for n in lazy if "asyncflow." + n in sys.modules]

    # op families: none imported (but by tf.tpu, read above), until a GraphDef names one
    from google.protobuf import text_format
    graph_def = text_format.Parse(%r, tf.GraphDef())
    with tf.Graph().as_default():
        tf.import_graph_def(graph_def, name="")
        with tf.Session() as sess:
            out["inplace_add"] = sess.run("add:0").tolist()
    out["family_loaded"] = "asyncflow.ops.array_extra_ops" in sys.modules
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
        [sys.executable, "-c", _SCRIPT % (LAZY, _GRAPH_DEF)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loaded_at_import"] == []
    assert out["absl_at_import"] is False
    assert out["flags"] == [True, True]
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
    assert out["families_at_import"] == []
    x = np.array([1.0, 2.0, 3.0])
    x[[1]] += [10.0]  # InplaceAdd's definition
    assert out["inplace_add"] == x.tolist()
    assert out["family_loaded"] is True


def test_lazy_op_index_is_current():
    """ops/lazy_index.py lists what each lazy family registers, none of them is imported
    by `import asyncflow`, and none changes an op another module registers (its kernels,
    gradient, shape function or attrs), which would then depend on import order."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "lazy_op_index.py")],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stdout.strip() == "ok"


def test_lookups_import_lazy_families():
    from asyncflow import registry
    from asyncflow.ops import lazy_index

    lazy = {n for names in lazy_index.FAMILIES.values() for n in names}
    every = registry.all_op_defs()
    assert lazy <= set(every)  # the listings hold every family's ops
    assert registry.get_op_def("InplaceAdd").name == "InplaceAdd"
    with pytest.raises(ValueError, match="'InplaceAdd' is already registered"):
        registry.register_op("InplaceAdd")
    with pytest.raises(KeyError, match="Op type not registered 'NoSuchOpType'"):
        registry.get_op_def("NoSuchOpType")
