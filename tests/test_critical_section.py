"""tf.CriticalSection (asyncflow/critical_section.py) against TF 2.21's recorded results
(tests/fixtures/critical_section/, recorded by record_critical_section.py from
critical_section_cases.py): the same program, and TF's own GraphDef of it, give TF's
values over three runs; steps run from several threads execute the section one at a
time (every read after an increment sees its own increment only).
"""

from __future__ import annotations

import json
import pathlib
import sys
import threading

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import critical_section_cases as cases  # noqa: E402

FIX = HERE / "critical_section"
RECORDED = json.loads((FIX / "values.json").read_text())


def _runs(sess, fetch, n=3):
    return [{k: np.asarray(v).tolist() for k, v in sess.run(fetch).items()} for _ in range(n)]


def test_program_matches_tf():
    with tf.Graph().as_default() as g:
        out = cases.build(tf)
        assert {"MutexV2", "MutexLock", "ConsumeMutexLock"} <= {o.type for o in g.get_operations()}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert _runs(sess, out) == RECORDED["runs"]


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((FIX / "graph.pb").read_bytes())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetch = {k: g.get_tensor_by_name(n) for k, n in RECORDED["tensors"].items()}
        with tf.Session() as sess:
            sess.run(g.get_operation_by_name(RECORDED["init"]))
            assert _runs(sess, fetch) == RECORDED["runs"]


def test_threads_run_the_section_one_at_a_time():
    with tf.Graph().as_default():
        out = cases.build(tf)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            seen = []

            def work():
                for _ in range(25):
                    seen.append(float(sess.run(out["seen"])))

            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
    assert sorted(seen) == [float(i) for i in range(1, 101)]


def test_a_section_used_inside_itself_is_refused():
    with tf.Graph().as_default():
        cs = tf.CriticalSection()
        with pytest.raises(ValueError, match="already running"):
            cs.execute(lambda: cs.execute(lambda: tf.constant(1.0)))


def test_a_failed_step_releases_the_section():
    with tf.Graph().as_default():
        cs = tf.CriticalSection()
        x = tf.placeholder(tf.float32)
        y = cs.execute(lambda: tf.check_numerics(x, "bad") * 2)
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(y, {x: np.inf})
            assert sess.run(y, {x: 1.0}) == 2.0
