"""oneDNN's convolutions (Intel's deep-learning kernels, the library TF's CPU build calls
for them) through its C API, for float32 2-D convolutions on the CPU.

Why: LeNet's layers on the 2-vCPU Intel Xeon (AVX-512), one process, medians of 30
calls: the second layer's forward ([64,14,14,32] * [5,5,32,64] SAME, bias and ReLU
applied) 2.5 ms on oneDNN's `brgconv` against 4.4 ms for our spectral path (DFT as
GEMMs, memory-bound) and TF 2.21's 2.9 ms; its input gradient 2.4 ms against 4.2; the
first layer's forward ([64,28,28,1] * [5,5,1,32]) 0.28 ms against ~1.0 for cnn_jit's
compiled loop.  oneDNN computes each output as a direct convolution, so a NaN or an
infinity stays in the outputs whose windows hold it, as in TF.  The filter gradient
stays ours where oneDNN's is slower (`_FILTER_GRAD`, measured in benchmarks/README.md).

The library comes from the `onednn-cpu-gomp` wheel (oneDNN 3.2, GNU OpenMP threading:
the same OpenMP runtime as numba's pool, ops/jit_threads.py).  It is loaded on first
use, inside `jit_threads.launching()`, so GNU OpenMP's spin count is ours when this is
the first library to load it.  `available()` is False where the wheel is missing, the
library does not load, ASYNCFLOW_ONEDNN=0, or a call failed in a way that is not a
shape oneDNN declines: every caller then takes its own path, as before.

Denormals: the calling thread runs with TF's flush-to-zero modes (devices/denormal.py);
GNU OpenMP's other threads keep theirs (numba's pool sets them per block, ops/jit_flush.py,
and these are the same threads where the same thread started both), so a denormal may
survive in the part of a two-thread call computed there.

Primitives (a primitive descriptor, the primitive, the weights' reorder into the layout
oneDNN chose) are made once per geometry and thread count and kept (`_cache`, at most
`_MAX_PRIMITIVES`).  Memory objects wrap the NumPy buffers for one call and are freed
after it, so calls from several threads share nothing mutable.  The thread count is the
CPU budget's grant to the call (`cpu_budget.granted()`; one in a forked child, whose
OpenMP team is gone, and under TF_DETERMINISTIC_OPS=1: the filter gradient's bits follow
its thread count); oneDNN fixes a primitive's threads when it is made, hence the key.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import sys
import threading

import numpy as np

from asyncflow.devices import cpu_budget
from asyncflow.ops import jit_threads

__all__ = ["available", "library", "conv_backward_data", "conv_backward_weights", "conv_forward"]

_ENABLED = os.environ.get("ASYNCFLOW_ONEDNN", "") in ("", "1")
_MAX_PRIMITIVES = 128

# dnnl_types.h (oneDNN 3.x)
_SUCCESS, _UNIMPLEMENTED = 0, 3
_CPU_ENGINE = 1
_IN_ORDER = 1
_F32 = 3
_TAG_ANY = 1
_FORWARD_TRAINING, _FORWARD_INFERENCE = 64, 96
_CONV_DIRECT = 1
_ELTWISE_RELU = 0x20
_QUERY_WEIGHTS_MD = 131
_QUERY_SCRATCHPAD_MD = 136
_SCRATCHPAD_USER = 1
_ARG_SCRATCHPAD = 80
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS = 1, 17, 33, 41
_ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS = 129, 145, 161
_QUERY_DIFF_WEIGHTS_MD = 132

_Dims = ctypes.c_int64 * 12
_vp = ctypes.c_void_p


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _vp)]


class _Declined(Exception):
    """oneDNN has no implementation for this problem (a caller takes its own path)."""


_lock = threading.Lock()
_state: dict = {}  # "lib", "engine" once loaded; "failed" once it cannot be used
_cache: dict = {}
_local = threading.local()  # .stream: this thread's stream


def _library_path() -> str | None:
    try:
        files = importlib.metadata.distribution("onednn-cpu-gomp").files or ()
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "libdnnl.so.3":
            return str(f.locate())
    return None


def _load():
    """The library and a CPU engine, loaded once; None where unusable."""
    if "lib" in _state or "failed" in _state:
        return _state.get("lib")
    with _lock:
        if "lib" in _state or "failed" in _state:
            return _state.get("lib")
        path = _library_path() if _ENABLED else None
        if path is None:
            _state["failed"] = "not installed" if _ENABLED else "ASYNCFLOW_ONEDNN=0"
            return None
        try:
            with jit_threads.launching():
                lib = ctypes.CDLL(path)
            for name in (
                "dnnl_primitive_desc_query_md",
                "dnnl_memory_desc_get_size",
            ):
                getattr(lib, name).restype = _vp
            lib.dnnl_primitive_desc_query_md.argtypes = [_vp, ctypes.c_int, ctypes.c_int]
            lib.dnnl_memory_desc_get_size.argtypes = [_vp]
            lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
            lib.dnnl_memory_desc_equal.argtypes = [_vp, _vp]
            engine = _vp()
            _check(lib.dnnl_engine_create(ctypes.byref(engine), _CPU_ENGINE, ctypes.c_size_t(0)))
            gomp = ctypes.CDLL("libgomp.so.1")
        except (OSError, AttributeError, _Failed, _Declined) as e:
            _state["failed"] = f"{type(e).__name__}: {e}"
            return None
        _state["engine"] = engine
        _state["omp_set_num_threads"] = gomp.omp_set_num_threads
        _state["lib"] = lib
        return lib


def library():
    """The loaded library (ctypes), or None where it cannot be used (module note)."""
    return _load() if _ENABLED else None


def available() -> bool:
    """Whether oneDNN's convolutions may run (module note)."""
    return _ENABLED and _load() is not None


class _Failed(RuntimeError):
    """A oneDNN call failed (out of memory, an argument it rejects): while a primitive is
    made, the caller's own path takes the problem; while it runs, the kernel's error."""


def _check(status: int) -> None:
    if status == _UNIMPLEMENTED:
        raise _Declined
    if status != _SUCCESS:
        raise _Failed(f"oneDNN call failed with status {status}")


def _stream():
    s = getattr(_local, "stream", None)
    if s is None:
        s = _vp()
        _check(_state["lib"].dnnl_stream_create(ctypes.byref(s), _state["engine"], _IN_ORDER))
        _local.stream = s
    return s


def _md(dims, strides=None):
    """A float32 memory descriptor: plain with these element strides, or any layout."""
    lib, md = _state["lib"], _vp()
    if strides is None:
        _check(lib.dnnl_memory_desc_create_with_tag(
            ctypes.byref(md), len(dims), _Dims(*dims), _F32, _TAG_ANY
        ))  # fmt: skip
    else:
        _check(lib.dnnl_memory_desc_create_with_strides(
            ctypes.byref(md), len(dims), _Dims(*dims), _F32, _Dims(*strides)
        ))  # fmt: skip
    return md


def _activation_md(n, c, h, w, fmt):
    """x or y as oneDNN's (N, C, H, W) over a C-contiguous array in TF's data_format."""
    if fmt == "NHWC":
        return _md((n, c, h, w), (h * w * c, 1, w * c, c))
    return _md((n, c, h, w), (c * h * w, h * w, w, 1))


def _filter_md(kh, kw, c, oc):
    """TF's HWIO filter as oneDNN's (O, I, KH, KW)."""
    return _md((oc, c, kh, kw), (1, oc, kw * c * oc, c * oc))


def _attr(relu: bool = False):
    """Primitive attributes: the scratchpad ours (`_execute` gives each call its own:
    the library's is shared and binds a primitive to the thread that made it, where
    our kernels run on any thread), and the ReLU as a post-op where asked."""
    lib, attr = _state["lib"], _vp()
    _check(lib.dnnl_primitive_attr_create(ctypes.byref(attr)))
    try:
        _check(lib.dnnl_primitive_attr_set_scratchpad_mode(attr, _SCRATCHPAD_USER))
        if relu:
            ops = _vp()
            _check(lib.dnnl_post_ops_create(ctypes.byref(ops)))
            try:
                _check(lib.dnnl_post_ops_append_eltwise(
                    ops, _ELTWISE_RELU, ctypes.c_float(0), ctypes.c_float(0)
                ))  # fmt: skip
                _check(lib.dnnl_primitive_attr_set_post_ops(attr, ops))
            finally:
                lib.dnnl_post_ops_destroy(ops)
    except BaseException:
        lib.dnnl_primitive_attr_destroy(attr)
        raise
    return attr


class _Exe:
    """A primitive made from its descriptor, with its scratchpad's descriptor and size."""

    __slots__ = ("prim", "sp_md", "sp_size")

    def __init__(self, pd):
        lib = _state["lib"]
        self.prim = _vp()
        _check(lib.dnnl_primitive_create(ctypes.byref(self.prim), pd))
        self.sp_md = _vp(lib.dnnl_primitive_desc_query_md(pd, _QUERY_SCRATCHPAD_MD, 0))
        self.sp_size = lib.dnnl_memory_desc_get_size(self.sp_md) if self.sp_md else 0


class _Prim:
    """One convolution primitive, with the reorder of TF's filter into its layout."""

    __slots__ = ("pd", "prim", "reorder_pd", "reorder", "w_md", "w_size", "mds")

    def __del__(self):
        if sys.is_finalizing():
            return  # (the process ends: the library's memory goes with it)
        lib = _state.get("lib")
        if lib is None:
            return
        for p in (self.prim, self.reorder):
            if p is not None:
                lib.dnnl_primitive_destroy(p.prim)
        for pd in (self.pd, self.reorder_pd):
            if pd:
                lib.dnnl_primitive_desc_destroy(pd)
        for md in self.mds:
            lib.dnnl_memory_desc_destroy(md)


def _geometry_dims(g):
    strides = _Dims(g.sh, g.sw)
    dilates = _Dims(g.dh - 1, g.dw - 1)
    lo, hi = _Dims(g.pad[0], g.pad[2]), _Dims(g.pad[1], g.pad[3])
    return strides, dilates, lo, hi


def _finish(p: _Prim, plain_w, gradient: bool = False) -> _Prim:
    """The primitive made, and the reorder between TF's plain filter and the layout
    oneDNN chose for it: into that layout for a filter read, out of it for the filter
    gradient (`gradient`)."""
    lib = _state["lib"]
    p.prim = _Exe(p.pd)
    query = _QUERY_DIFF_WEIGHTS_MD if gradient else _QUERY_WEIGHTS_MD
    chosen = _vp(lib.dnnl_primitive_desc_query_md(p.pd, query, 0))
    p.w_md, p.w_size = chosen, lib.dnnl_memory_desc_get_size(chosen)
    if not lib.dnnl_memory_desc_equal(plain_w, chosen):
        _reorder(p, *((chosen, plain_w) if gradient else (plain_w, chosen)))
    return p


def _reorder(p: _Prim, src_md, dst_md) -> None:
    lib, engine = _state["lib"], _state["engine"]
    attr = _attr()
    try:
        p.reorder_pd = _vp()
        _check(lib.dnnl_reorder_primitive_desc_create(
            ctypes.byref(p.reorder_pd), src_md, engine, dst_md, engine, attr
        ))  # fmt: skip
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    p.reorder = _Exe(p.reorder_pd)


def _new_prim() -> _Prim:
    p = _Prim()
    p.pd = p.prim = p.reorder_pd = p.reorder = None
    p.mds = []
    return p


def _forward_prim(g, fmt, bias: bool, relu: bool, training: bool, make=True) -> _Prim:
    lib, engine = _state["lib"], _state["engine"]
    p = _new_prim()
    x_md = _activation_md(g.n, g.c, g.h, g.w, fmt)
    y_md = _activation_md(g.n, g.oc, g.oh, g.ow, fmt)
    plain_w = _filter_md(g.kh, g.kw, g.c, g.oc)
    any_w = _md((g.oc, g.c, g.kh, g.kw))
    b_md = _md((g.oc,), (1,)) if bias else None
    p.mds += [m for m in (x_md, y_md, plain_w, any_w, b_md) if m is not None]
    attr = _attr(relu)
    try:
        p.pd = _vp()
        prop = _FORWARD_TRAINING if training else _FORWARD_INFERENCE
        _check(lib.dnnl_convolution_forward_primitive_desc_create(
            ctypes.byref(p.pd), engine, prop, _CONV_DIRECT, x_md, any_w, b_md, y_md,
            *_geometry_dims(g), attr,
        ))  # fmt: skip
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    return _finish(p, plain_w) if make else p


def _backward(g, fmt):
    """(the forward's descriptor, oneDNN's hint; a new _Prim holding the descriptors of
    x (or dx), dy, TF's plain filter and any filter layout, in that order)."""
    hint = _forward_prim(g, fmt, False, False, True, make=False)
    p = _new_prim()
    p.mds += [
        _activation_md(g.n, g.c, g.h, g.w, fmt),
        _activation_md(g.n, g.oc, g.oh, g.ow, fmt),
        _filter_md(g.kh, g.kw, g.c, g.oc),
        _md((g.oc, g.c, g.kh, g.kw)),
    ]
    return hint, p


def _backward_data_prim(g, fmt) -> _Prim:
    lib, engine = _state["lib"], _state["engine"]
    hint, p = _backward(g, fmt)
    dx_md, dy_md, plain_w, any_w = p.mds
    p.pd, attr = _vp(), _attr()
    try:
        _check(lib.dnnl_convolution_backward_data_primitive_desc_create(
            ctypes.byref(p.pd), engine, _CONV_DIRECT, dx_md, any_w, dy_md,
            *_geometry_dims(g), hint.pd, attr,
        ))  # fmt: skip
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    del hint
    return _finish(p, plain_w)


def _backward_weights_prim(g, fmt) -> _Prim:
    """The filter gradient into the layout oneDNN chooses, and the reorder from it into
    TF's HWIO (`_finish`: the other way round from the forward's)."""
    lib, engine = _state["lib"], _state["engine"]
    hint, p = _backward(g, fmt)
    x_md, dy_md, plain_w, any_w = p.mds
    p.pd, attr = _vp(), _attr()
    try:
        _check(lib.dnnl_convolution_backward_weights_primitive_desc_create(
            ctypes.byref(p.pd), engine, _CONV_DIRECT, x_md, any_w, None, dy_md,
            *_geometry_dims(g), hint.pd, attr,
        ))  # fmt: skip
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    del hint
    return _finish(p, plain_w, gradient=True)


def _threads() -> int:
    """The threads a call runs on: the CPU budget's grant; one in a forked child (its
    OpenMP team is gone) and under TF_DETERMINISTIC_OPS=1 (a filter gradient's sums are
    split by thread, so its last bits follow the thread count)."""
    if jit_threads._forked[0] or cpu_budget.deterministic():
        return 1
    n = cpu_budget.granted() or cpu_budget.threads_now()
    return max(1, min(n, cpu_budget.cores()))


def _prim(kind: tuple, make) -> _Prim | None:
    """The primitive of this kind (made now if new), or None where oneDNN declined it."""
    p = _cache.get(kind, _cache)
    if p is _cache:
        with _lock:
            p = _cache.get(kind, _cache)
            if p is _cache:
                if len(_cache) >= _MAX_PRIMITIVES:
                    _cache.clear()
                _state["omp_set_num_threads"](kind[-1])  # (fixes the primitive's threads)
                try:
                    p = make()
                except (_Declined, _Failed):
                    p = None  # (declined for good: the caller's own path, every time)
                _cache[kind] = p
    return p


def _aligned(nbytes: int, dtype=np.uint8):
    """A new buffer of `nbytes` whose data starts on a 64-byte boundary, as oneDNN's own
    allocations do (its blocked layouts and scratchpads; NumPy's start on 16)."""
    raw = np.empty(nbytes + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip : skip + nbytes].view(dtype)


def _execute(exe: _Exe, args) -> None:
    """Run `exe` with (argument, memory descriptor, NumPy array) triples, and a
    scratchpad of its own."""
    lib, engine = _state["lib"], _state["engine"]
    if exe.sp_size:
        args = [*args, (_ARG_SCRATCHPAD, exe.sp_md, _aligned(exe.sp_size))]
    mems = []
    try:
        for arg, md, a in args:
            m = _vp()
            _check(lib.dnnl_memory_create(ctypes.byref(m), md, engine, _vp(a.ctypes.data)))
            mems.append((arg, m))
        table = (_Arg * len(mems))(*[_Arg(arg, m) for arg, m in mems])
        stream = _stream()
        _check(lib.dnnl_primitive_execute(exe.prim, stream, len(mems), table))
        _check(lib.dnnl_stream_wait(stream))
    finally:
        for _, m in mems:
            lib.dnnl_memory_destroy(m)


def _filter_in(p: _Prim, w, plain_w):
    """The filter in the primitive's layout (reordered into a new buffer if it differs)."""
    if p.reorder is None:
        return w
    out = _aligned(p.w_size, np.float32)
    _execute(p.reorder, [(_ARG_SRC, plain_w, w), (_ARG_DST, p.w_md, out)])
    return out


def _suits(g, *arrays) -> bool:
    return g.groups == 1 and all(
        a.dtype == np.float32 and a.flags.c_contiguous for a in arrays
    )  # fmt: skip


def conv_forward(g, x, w, fmt: str, bias=None, relu: bool = False, threads: int = 0):
    """TF's Conv2D of float32 x (C-contiguous, in `fmt`) and HWIO w on oneDNN, with
    `bias` added and the ReLU applied when given; on `threads` threads (0: the CPU
    budget's grant); None where oneDNN does not take it."""
    if not _suits(g, x, w) or (bias is not None and not _suits(g, bias)) or _load() is None:
        return None
    nthr = threads or _threads()
    kind = ("fwd", g.n, g.h, g.w, g.c, g.kh, g.kw, g.oc, g.sh, g.sw, g.dh, g.dw, g.pad, fmt,
            bias is not None, relu, nthr)  # fmt: skip
    try:
        p = _prim(kind, lambda: _forward_prim(g, fmt, bias is not None, relu, False))
        if p is None:
            return None
        _state["omp_set_num_threads"](nthr)
        shape = (g.n, g.oh, g.ow, g.oc) if fmt == "NHWC" else (g.n, g.oc, g.oh, g.ow)
        y = np.empty(shape, np.float32)
        x_md, y_md, plain_w = p.mds[0], p.mds[1], p.mds[2]
        args = [(_ARG_SRC, x_md, x), (_ARG_WEIGHTS, p.w_md, _filter_in(p, w, plain_w))]
        if bias is not None:
            args.append((_ARG_BIAS, p.mds[4], bias))
        _execute(p.prim, [*args, (_ARG_DST, y_md, y)])
        return y
    except _Declined:
        return None


def conv_backward_data(g, w, dy, fmt: str):
    """TF's Conv2DBackpropInput of HWIO w and float32 dy (C-contiguous, in `fmt`) on
    oneDNN; None where oneDNN does not take it."""
    if not _suits(g, w, dy) or _load() is None:
        return None
    nthr = _threads()
    kind = ("bwd_data", g.n, g.h, g.w, g.c, g.kh, g.kw, g.oc, g.sh, g.sw, g.dh, g.dw, g.pad,
            fmt, nthr)  # fmt: skip
    try:
        p = _prim(kind, lambda: _backward_data_prim(g, fmt))
        if p is None:
            return None
        _state["omp_set_num_threads"](nthr)
        shape = (g.n, g.h, g.w, g.c) if fmt == "NHWC" else (g.n, g.c, g.h, g.w)
        dx = np.empty(shape, np.float32)
        dx_md, dy_md, plain_w = p.mds[0], p.mds[1], p.mds[2]
        w_in = _filter_in(p, w, plain_w)
        _execute(p.prim, [(_ARG_DIFF_DST, dy_md, dy), (_ARG_WEIGHTS, p.w_md, w_in),
                          (_ARG_DIFF_SRC, dx_md, dx)])  # fmt: skip
        return dx
    except _Declined:
        return None


def conv_backward_weights(g, x, dy, fmt: str):
    """TF's Conv2DBackpropFilter of float32 x and dy (C-contiguous, in `fmt`) on oneDNN,
    as HWIO; None where oneDNN does not take it."""
    if not _suits(g, x, dy) or _load() is None:
        return None
    nthr = _threads()
    kind = ("bwd_weights", g.n, g.h, g.w, g.c, g.kh, g.kw, g.oc, g.sh, g.sw, g.dh, g.dw,
            g.pad, fmt, nthr)  # fmt: skip
    try:
        p = _prim(kind, lambda: _backward_weights_prim(g, fmt))
        if p is None:
            return None
        _state["omp_set_num_threads"](nthr)
        x_md, dy_md, plain_w = p.mds[0], p.mds[1], p.mds[2]
        dw = np.empty((g.kh, g.kw, g.c, g.oc), np.float32)
        blocked = dw if p.reorder is None else _aligned(p.w_size, np.float32)
        _execute(p.prim, [(_ARG_SRC, x_md, x), (_ARG_DIFF_DST, dy_md, dy),
                          (_ARG_DIFF_WEIGHTS, p.w_md, blocked)])  # fmt: skip
        if p.reorder is not None:
            _execute(p.reorder, [(_ARG_SRC, p.w_md, blocked), (_ARG_DST, plain_w, dw)])
        return dw
    except _Declined:
        return None
