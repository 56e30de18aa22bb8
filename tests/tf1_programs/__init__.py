"""Small TF1 programs that run unchanged on tf.compat.v1 and on asyncflow.

Each program is a function `program(tf) -> dict` that builds into the default graph,
runs it, and returns named results. The same source runs with
`tf = tensorflow.compat.v1` (record.py writes tests/fixtures/tf1_programs.json) and with
`tf = asyncflow` (tests/test_tf1_compat.py compares against that file).

Invariant: nothing here imports tensorflow or asyncflow; programs reach the runtime only
through their `tf` argument, and use only tf.compat.v1 names.
"""

from __future__ import annotations

import numpy as np

from tf1_programs import (
    p_api,
    p_array,
    p_errors,
    p_math,
    p_matmul,
    p_names,
    p_reductions,
    p_session,
    p_shapes,
    p_slicing,
    p_tutorials,
    p_variables,
)

_MODULES = (
    p_math,
    p_reductions,
    p_matmul,
    p_array,
    p_slicing,
    p_variables,
    p_session,
    p_shapes,
    p_names,
    p_errors,
    p_api,
    p_tutorials,
)

PROGRAMS = {fn.__name__: fn for m in _MODULES for fn in m.PROGRAMS}


def to_json(value):
    """A JSON-able form of a program result that keeps dtype and shape of arrays.

    Arrays and NumPy scalars become {"dtype", "shape", "value"}; strings in arrays
    (bytes) are decoded so that object and fixed-width byte arrays compare equal.
    """
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in "OSU":
            dtype = "string"
            flat = [v.decode() if isinstance(v, bytes) else str(v) for v in arr.ravel()]
            data = np.array(flat, dtype=object).reshape(arr.shape).tolist()
        else:
            dtype = arr.dtype.name
            data = arr.tolist()
        return {"dtype": dtype, "shape": list(arr.shape), "value": data}
    if isinstance(value, bytes):
        return {"bytes": value.decode()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"program result of unsupported type {type(value).__name__}: {value!r}")
