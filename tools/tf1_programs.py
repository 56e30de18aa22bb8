"""Run whole TF1 tutorial programs unchanged under TF 2.21 and under asyncflow, side by side.

    python tools/tf1_programs.py [--tf-python /work/tfvenv/bin/python] [--af-python PY]
        [--only tf|asyncflow] [--timeout S] [--max-steps N] [--max-epochs E]
        [--train-examples M] [--repeat K] [--json OUT] [--verbose] FILE.py ...

The programs are text the user already has on disk (e.g. the classic tutorial
repositories); this tool downloads nothing and no program is part of the project.  Each
file runs in a child process (this file with `--child`), once per backend, in a fresh
temporary working directory:

- `tf`: real TensorFlow with `import tensorflow` giving `tf.compat.v1` with v2 behaviour
  disabled, as a TF1 user on TF 2.x runs them (`TF_USE_LEGACY_KERAS=1` for TF1's RNN cells).
- `asyncflow`: `import tensorflow` gives asyncflow; `tensorflow.X.Y` resolves to
  asyncflow's attribute chain `X.Y` when that is a module.

Both sides get the same name map and nothing more (no behaviour is patched):
`tensorflow.contrib.rnn` is the backend's own `nn.rnn_cell` names plus its `nn.static_rnn`
family (TF1's contrib.rnn exported those), `contrib.layers.flatten` and
`contrib.data.Dataset` are the backend's `layers.flatten` and `data.Dataset` (what they
became), and `tensorflow.contrib` holds nothing else;
`tensorflow.examples.tutorials.mnist.input_data` (and the old top-level `input_data`) is the
stand-in below serving deterministic synthetic MNIST-shaped data (same shapes, dtypes,
`one_hot`, `next_batch` epoch/shuffle semantics as TF1's DataSet; class-dependent blobs, so
it is learnable); `matplotlib` is a stub that accepts every call and draws nothing.
NumPy's and `random`'s global seeds are set to 0 before the program runs, so data the
program makes itself (noise, toy sequences) is the same under both backends.

Caps for a quick correctness pass (off unless given), substituted in the program's text:
`--max-steps N` rewrites a top-level `num_steps|training_steps|num_iterations = K` to
`min(K, N)` and `training_iters = K` (compared with `step * batch_size`) to `min(K, N*128)`;
`--max-epochs E` rewrites `training_epochs|num_epochs|epochs = K` to `min(K, E)` and a
literal `for v in range(K):` with K > 20 to `range(min(K, E))` (the loops of programs
without named constants); `--train-examples M` shrinks the stand-in's training set
(default 55,000 as TF1's).  The report gives, per program and backend: ran or not, the
first error line, wall time, and the printed loss/accuracy lines side by side.
`--repeat K` runs the backends alternately K times and reports each run's wall time
(imports included) with the 1-minute load at its start, the medians, and asyncflow's
median over TF's; run it under `flock /tmp/bench.lock` on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import json
import os
import re
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.abspath(__file__)
TF_PYTHON = "/work/tfvenv/bin/python"

# -- the synthetic MNIST stand-in (tensorflow.examples.tutorials.mnist.input_data) --------


def _mnist_module():
    import collections

    import numpy as np

    mod = types.ModuleType("input_data")
    Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])

    def _make(n, seed):
        """`n` uint8 28x28 digits of 10 classes: each class a fixed set of soft blobs,
        each image its class's pattern at a random brightness plus noise."""
        proto_rng = np.random.RandomState(1234)
        yy, xx = np.mgrid[0:28, 0:28]
        protos = np.zeros((10, 28, 28), np.float32)
        for k in range(10):
            for _ in range(3):
                cy, cx = proto_rng.uniform(5, 23, size=2)
                sy, sx = proto_rng.uniform(1.5, 4.0, size=2)
                protos[k] += np.exp(-(((yy - cy) / sy) ** 2 + ((xx - cx) / sx) ** 2))
        protos = np.clip(protos, 0, 1).reshape(10, 784)
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        scale = rng.uniform(0.2, 0.8, (n, 1)).astype(np.float32)
        img = protos[labels] * scale + rng.random((n, 784), dtype=np.float32) * 0.9
        return (np.clip(img, 0, 1) * 255).astype(np.uint8), labels

    class DataSet:
        """TF1's `mnist.DataSet`: images [N, 784] (or [N, 28, 28, 1] with reshape=False)
        scaled to [0, 1] as float32, labels uint8 or one-hot float64."""

        def __init__(self, images, labels, dtype=np.float32, reshape=True, one_hot=False):
            n = images.shape[0]
            if one_hot:
                oh = np.zeros((n, 10))
                oh[np.arange(n), labels] = 1
                labels = oh
            images = images.reshape(n, 784) if reshape else images.reshape(n, 28, 28, 1)
            if np.dtype(dtype) == np.float32:
                images = images.astype(np.float32) * np.float32(1.0 / 255.0)
            self._images, self._labels, self._num_examples = images, labels, n
            self._epochs_completed = 0
            self._index_in_epoch = 0
            self._rng = np.random.RandomState(0)

        images = property(lambda self: self._images)
        labels = property(lambda self: self._labels)
        num_examples = property(lambda self: self._num_examples)
        epochs_completed = property(lambda self: self._epochs_completed)

        def _shuffle(self):
            perm = self._rng.permutation(self._num_examples)
            self._images, self._labels = self._images[perm], self._labels[perm]

        def next_batch(self, batch_size, fake_data=False, shuffle=True):
            start = self._index_in_epoch
            if self._epochs_completed == 0 and start == 0 and shuffle:
                self._shuffle()
            if start + batch_size > self._num_examples:
                # The epoch's rest, then the start of the next (reshuffled) epoch.
                self._epochs_completed += 1
                rest = self._num_examples - start
                images_rest = self._images[start:]
                labels_rest = self._labels[start:]
                if shuffle:
                    self._shuffle()
                self._index_in_epoch = batch_size - rest
                end = self._index_in_epoch
                return (
                    np.concatenate((images_rest, self._images[:end]), axis=0),
                    np.concatenate((labels_rest, self._labels[:end]), axis=0),
                )
            self._index_in_epoch += batch_size
            end = self._index_in_epoch
            return self._images[start:end], self._labels[start:end]

    def read_data_sets(
        train_dir="",
        fake_data=False,
        one_hot=False,
        dtype=np.float32,
        reshape=True,
        validation_size=5000,
        seed=None,
        source_url=None,
    ):
        n_train = int(os.environ.get("TF1P_TRAIN_EXAMPLES", "55000"))
        images, labels = _make(n_train + validation_size, 1)
        test_images, test_labels = _make(10000, 2)
        kw = dict(dtype=dtype, reshape=reshape, one_hot=one_hot)
        return Datasets(
            train=DataSet(images[validation_size:], labels[validation_size:], **kw),
            validation=DataSet(images[:validation_size], labels[:validation_size], **kw),
            test=DataSet(test_images, test_labels, **kw),
        )

    mod.DataSet = DataSet
    mod.read_data_sets = read_data_sets
    return mod


# -- matplotlib: a stub that accepts everything ------------------------------------------


class _Stub:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Stub()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __getitem__(self, key):
        return _Stub()

    def __setitem__(self, key, value):
        pass

    def __iter__(self):
        return iter(())


def _pyplot_module():
    import numpy as np

    mod = types.ModuleType("matplotlib.pyplot")

    def subplots(nrows=1, ncols=1, *args, **kwargs):
        axes = np.empty((nrows, ncols), dtype=object)
        for i in range(nrows):
            for j in range(ncols):
                axes[i, j] = _Stub()
        if nrows == 1 or ncols == 1:
            axes = axes.reshape(-1)
            if axes.size == 1:
                axes = axes[0]
        return _Stub(), axes

    mod.subplots = subplots
    mod.__getattr__ = lambda name: _Stub()
    return mod


# -- the import map ----------------------------------------------------------------------


class _Proxy(types.ModuleType):
    """`tensorflow`: the backend's names plus the few the map adds (contrib, examples)."""

    def __init__(self, name, target, extra):
        super().__init__(name)
        self.__dict__.update(extra)
        self._target = target

    def __getattr__(self, name):
        return getattr(self._target, name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, table, resolve):
        self.table, self.resolve = table, resolve

    def find_spec(self, fullname, path=None, target=None):
        mod = self.table.get(fullname)
        if mod is None and self.resolve is not None:
            mod = self.resolve(fullname)
        if mod is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = self.table.get(spec.name)
        return mod if mod is not None else self.resolve(spec.name)

    def exec_module(self, module):
        pass


def _contrib_rnn(tf):
    """TF1's `tf.contrib.rnn`: the RNN cells and the static RNN functions."""
    mod = types.ModuleType("tensorflow.contrib.rnn")
    cells = tf.nn.rnn_cell
    for name in dir(cells):
        if name[:1].isupper():
            setattr(mod, name, getattr(cells, name))
    for name in ("static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn"):
        if hasattr(tf.nn, name):
            setattr(mod, name, getattr(tf.nn, name))
    return mod


def _install(backend: str):
    if backend == "tf":
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
        import tensorflow as top
        import tensorflow.compat.v1 as target

        target.disable_v2_behavior()
        _ = target.nn.rnn_cell.BasicLSTMCell  # load the lazy cells before the swap
        path = list(top.__path__)
        resolve = None
    else:
        import asyncflow as target

        path = []

        def resolve(fullname):
            if not fullname.startswith("tensorflow."):
                return None
            obj = target
            for part in fullname.split(".")[1:]:
                obj = getattr(obj, part, None)
                if obj is None:
                    return None
            return obj if isinstance(obj, types.ModuleType) else None

    mnist = _mnist_module()
    rnn = _contrib_rnn(target)
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.rnn = rnn
    # TF1's contrib.layers.flatten and contrib.data.Dataset became layers.flatten and
    # data.Dataset; only those two names are mapped.
    contrib.layers = types.ModuleType("tensorflow.contrib.layers")
    contrib.layers.flatten = target.layers.flatten
    contrib.data = types.ModuleType("tensorflow.contrib.data")
    contrib.data.Dataset = target.data.Dataset
    tutorials = types.ModuleType("tensorflow.examples.tutorials")
    tutorials.mnist = types.ModuleType("tensorflow.examples.tutorials.mnist")
    tutorials.mnist.input_data = mnist
    examples = types.ModuleType("tensorflow.examples")
    examples.tutorials = tutorials
    tf = _Proxy("tensorflow", target, {"contrib": contrib, "examples": examples})
    tf.__path__ = path
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use = lambda *a, **k: None
    matplotlib.pyplot = _pyplot_module()
    matplotlib.gridspec = types.ModuleType("matplotlib.gridspec")
    matplotlib.gridspec.GridSpec = _Stub
    table = {
        "tensorflow.contrib": contrib,
        "tensorflow.contrib.rnn": rnn,
        "tensorflow.contrib.layers": contrib.layers,
        "tensorflow.contrib.data": contrib.data,
        "tensorflow.examples": examples,
        "tensorflow.examples.tutorials": tutorials,
        "tensorflow.examples.tutorials.mnist": tutorials.mnist,
        "tensorflow.examples.tutorials.mnist.input_data": mnist,
        "input_data": mnist,
        "matplotlib": matplotlib,
        "matplotlib.pyplot": matplotlib.pyplot,
        "matplotlib.gridspec": matplotlib.gridspec,
    }
    sys.modules.update(table)
    sys.modules["tensorflow"] = tf
    sys.meta_path.insert(0, _Finder(table, resolve))


# -- caps ---------------------------------------------------------------------------------

_STEP_NAMES = r"num_steps|training_steps|num_iterations"
_EPOCH_NAMES = r"training_epochs|num_epochs|epochs"


def _cap_assignment(src: str, names: str, limit: int) -> str:
    """`NAME = N` at a line's start (NAME one of `names`) becomes `NAME = min(N, limit)`."""
    return re.sub(
        rf"^({names})\s*=\s*(\d+)", lambda m: f"{m[1]} = min({m[2]}, {limit})", src, flags=re.M
    )


def cap_source(src: str, max_steps: int | None, max_epochs: int | None) -> str:
    if max_steps is not None:
        src = _cap_assignment(src, _STEP_NAMES, max_steps)
        src = _cap_assignment(src, "training_iters", max_steps * 128)
    if max_epochs is not None:
        src = _cap_assignment(src, _EPOCH_NAMES, max_epochs)
        src = re.sub(
            r"(\bfor\s+\w+\s+in\s+range\((?:[^(),]+,\s*)?)(\d+)(\)\s*:)",
            lambda m: f"{m[1]}min({m[2]}, {max_epochs}){m[3]}" if int(m[2]) > 20 else m[0],
            src,
        )
    return src


def _child(args):
    import random

    import numpy as np

    with open(args.file) as f:
        src = f.read()
    src = cap_source(src, args.max_steps, args.max_epochs)
    _install(args.child)
    np.random.seed(0)
    random.seed(0)
    sys.argv = [args.file]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.file)))
    # The program itself, its step counts capped, run as `python` runs a file (runpy),
    # from a private copy named as the program.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, os.path.basename(args.file))
        with open(path, "w") as f:
            f.write(src)
        runpy.run_path(path, run_name="__main__")


# -- the parent ---------------------------------------------------------------------------

_NUM_LINE = re.compile(r"loss|cost|accura|error|step|epoch|iter", re.I)


def first_error(text: str) -> str:
    """The exception line of the last traceback (or the last non-empty line)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback"):
            tail = [ln for ln in lines[i + 1 :] if not ln.startswith((" ", "\t"))]
            if tail:
                return tail[0][:200]
    return lines[-1][:200] if lines else ""


def run_one(python, backend, path, opts):
    cmd = [python, HERE, "--child", backend, os.path.abspath(path)]
    if opts.max_steps is not None:
        cmd += ["--max-steps", str(opts.max_steps)]
    if opts.max_epochs is not None:
        cmd += ["--max-epochs", str(opts.max_epochs)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONHASHSEED="0")
    if opts.train_examples:
        env["TF1P_TRAIN_EXAMPLES"] = str(opts.train_examples)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tf1p_") as cwd:
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=opts.timeout
            )
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            rc = "timeout"
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = f"timed out after {opts.timeout} s"
        wall = time.perf_counter() - t0
    lines = [ln for ln in out.splitlines() if _NUM_LINE.search(ln) and re.search(r"\d", ln)]
    return {
        "ok": rc == 0,
        "rc": rc,
        "wall_s": round(wall, 2),
        "load_1min": round(load, 2),
        "error": "" if rc == 0 else (first_error(err) if rc != "timeout" else err),
        "lines": lines,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--child", choices=["tf", "asyncflow"], help=argparse.SUPPRESS)
    p.add_argument("--tf-python", default=TF_PYTHON)
    p.add_argument("--af-python", default=sys.executable)
    p.add_argument("--only", choices=["tf", "asyncflow"])
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--max-epochs", type=int)
    p.add_argument("--train-examples", type=int)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.child:
        args.file = args.files[0]
        return _child(args)

    backends = [("tf", args.tf_python), ("asyncflow", args.af_python)]
    if args.only:
        backends = [b for b in backends if b[0] == args.only]
    report = {}
    for path in args.files:
        name = os.path.basename(path)
        runs = {b: [] for b, _ in backends}
        for _ in range(args.repeat):  # alternate the backends, run by run
            for backend, python in backends:
                runs[backend].append(run_one(python, backend, path, args))
        entry = {}
        for backend, rs in runs.items():
            r = dict(rs[-1])
            r["wall_s_all"] = [x["wall_s"] for x in rs]
            r["wall_s_median"] = statistics.median(r["wall_s_all"])
            r["load_1min_all"] = [x["load_1min"] for x in rs]
            r["ok"] = all(x["ok"] for x in rs)
            entry[backend] = r
        report[name] = entry
        _print_entry(name, entry, args.verbose)
    _print_table(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def _print_entry(name, entry, verbose):
    print(f"== {name}", flush=True)
    for backend, r in entry.items():
        state = "ok" if r["ok"] else f"FAIL ({r['rc']}): {r['error']}"
        runs = ", ".join(f"{w:.1f}" for w in r["wall_s_all"])
        loads = ", ".join(f"{x:.1f}" for x in r["load_1min_all"])
        print(
            f"   {backend:9s} {r['wall_s_median']:8.2f} s  {state}   [runs {runs}; load {loads}]"
        )
    lines = {b: r["lines"] for b, r in entry.items()}
    n = max((len(v) for v in lines.values()), default=0)
    show = range(n) if verbose else sorted({0, 1, n - 2, n - 1} & set(range(n)))
    for i in show:
        cols = [lines[b][i] if i < len(lines[b]) else "" for b in lines]
        print("     " + "  |  ".join(c.strip()[:70] for c in cols))


def _cell(r):
    return "{} {:.1f}s".format("ok" if r["ok"] else "FAIL", r["wall_s_median"])


def _print_table(report):
    """Status and median wall time per backend; with both backends, asyncflow's median
    over TF's (whole program, imports included; a failing run still has its time)."""
    both = all(len(e) == 2 for e in report.values())
    print(
        "\nprogram                                 "
        + "".join(f"{b:>12s}" for b in next(iter(report.values()), {}))
        + ("   af/tf" if both else "")
        + "   first error"
    )
    for name, entry in report.items():
        cells = "".join(f"{_cell(r):>12s}" for r in entry.values())
        if both:
            tf_s, af_s = entry["tf"]["wall_s_median"], entry["asyncflow"]["wall_s_median"]
            cells += f"   {af_s / tf_s:5.2f}" if tf_s > 0 else "      - "
        err = next((r["error"] for r in reversed(list(entry.values())) if not r["ok"]), "")
        print(f"{name[:40]:40s}{cells}   {err[:90]}")


if __name__ == "__main__":
    sys.exit(main())
