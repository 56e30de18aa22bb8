"""Helpers shared by the programs (no runtime import: `tf` is always passed in)."""

from __future__ import annotations


def error_class(fn) -> dict:
    """Run fn(); the class name of what it raised, or {"error": None} if nothing."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the class name is the result
        return {"error": type(exc).__name__}
    return {"error": None}


def run(tf, fetches, feed_dict=None):
    """One Session on the default graph, one run."""
    with tf.Session() as sess:
        return sess.run(fetches, feed_dict=feed_dict)


def shape_info(t) -> dict:
    """Static shape facts of a Tensor as TF1 prints and lists them."""
    s = t.shape
    return {
        "str": str(s),
        "ndims": s.ndims,
        "as_list": s.as_list() if s.ndims is not None else None,
    }
