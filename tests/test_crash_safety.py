"""A training process SIGKILLed at random moments always leaves a restorable checkpoint.

The child trains (w += 1, step += 1, s = str(step)) and saves after every step; the
parent kills it while it saves, checks that `latest_checkpoint` restores a consistent
state (w == step everywhere, s == str(step)), and restarts it, which must continue from
exactly that step.
"""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import asyncflow as af
from asyncflow.train import checkpoint_utils as cu
from asyncflow.train import saver as sv

CHILD = r"""
import os, sys
import numpy as np
import asyncflow as af
from asyncflow.train import saver as sv

d = sys.argv[1]
w = af.Variable(np.zeros(100_000, np.float32), name="w")
step = af.Variable(np.int64(0), name="step")
s = af.Variable(b"0", name="s")
train = af.group(af.assign_add(w, np.ones(100_000, np.float32)), af.assign_add(step, np.int64(1)))
label = af.placeholder(af.string, [], name="label")
set_label = af.assign(s, label)
saver = sv.Saver(max_to_keep=3)
with af.Session() as sess:
    sess.run(af.global_variables_initializer())
    latest = sv.latest_checkpoint(d)
    if latest:
        saver.restore(sess, latest)
        saver.recover_last_checkpoints(sv.get_checkpoint_state(d).all_model_checkpoint_paths)
    n = int(sess.run(step))
    print("START", n, flush=True)
    first = n + 1
    while True:
        sess.run(train)
        n = int(sess.run(step))
        sess.run(set_label, {label: str(n).encode()})
        saver.save(sess, os.path.join(d, "model.ckpt"), global_step=n)
        if n == first:
            print("SAVED", flush=True)
"""

KILLS = 8


def _check(prefix) -> int:
    """Restore `prefix` into a fresh graph; returns its step after checking consistency."""
    with af.Graph().as_default() as g:
        w = af.Variable(np.full(100_000, -1, np.float32), name="w")
        step = af.Variable(np.int64(-1), name="step")
        s = af.Variable(b"", name="s")
        saver = sv.Saver()
        with af.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            w_v, n, label = sess.run([w, step, s])
    assert (w_v == n).all() and label == str(n).encode()
    assert cu.load_variable(prefix, "step") == n
    return int(n)


def _read_line(proc) -> str:
    line = proc.stdout.readline().decode().strip()
    if not line:
        raise AssertionError(f"child exited early: {proc.wait()} {proc.stderr.read().decode()}")
    return line


@pytest.mark.timeout(180)
def test_sigkill_during_saves_leaves_a_restorable_latest_checkpoint(tmp_path):
    rng = random.Random(1234)
    d = str(tmp_path)
    expected_start = 0
    env = dict(os.environ, PYTHONHASHSEED="0")
    for _ in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, d],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert _read_line(proc) == f"START {expected_start}"
            assert _read_line(proc) == "SAVED"
            time.sleep(rng.uniform(0.0, 0.25))  # a random moment, not a synchronisation
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        latest = sv.latest_checkpoint(d)
        assert latest is not None
        got = _check(latest)
        assert got > expected_start  # progress, and nothing older than what was restored
        for prefix in sv.get_checkpoint_state(d).all_model_checkpoint_paths:
            _check(prefix)  # every checkpoint the state file names is complete
        expected_start = got
    assert len([f for f in os.listdir(d) if f.endswith(".index")]) <= 3 + KILLS
