"""Child process of `tf_kernel_tests.py`: run one TF kernel-test file, write each case's
outcome as JSON.

With `--backend asyncflow` it first installs an import hook under which `tensorflow`
(and `absl.testing`, when absl is absent) resolve to asyncflow and to the small test
base below; with `--backend tf` the file runs under real TensorFlow in graph mode.  The
shim only maps names: a TF name asyncflow lacks raises AttributeError when the test
touches it, and that case fails, as it would for a user.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import importlib.abc
import importlib.util
import itertools
import json
import os
import re
import signal
import sys
import tempfile
import threading
import types
import unittest

import numpy as np

# -- the asyncflow side of `import tensorflow` -------------------------------------------


def _af():
    import asyncflow

    return asyncflow


def _snake(name: str) -> str:
    """TF's op-type -> Python name rule (python_op_gen's ToSnakeCase): `_` before a
    capital after a lowercase letter, or before one that starts a word after capitals
    (`MatMul` -> `mat_mul`, `Conv2DBackpropInput` -> `conv2d_backprop_input`)."""
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0:
            prev, nxt = name[i - 1], name[i + 1 : i + 2]
            if prev.islower() or (prev.isupper() and nxt.islower()):
                out.append("_")
        out.append(c.lower())
    return "".join(out)


@functools.cache
def _gen_builders() -> dict:
    from asyncflow import registry

    return {_snake(name): d for name, d in registry.all_op_defs().items()}


def _gen_op(name: str):
    """`gen_*_ops.snake_name(...)`: build the registered op of that type."""
    # gen_*_ops prefix hidden ops with "_" (gen_data_flow_ops._stack is op Stack).
    op_def = _gen_builders().get(name.lstrip("_") if name.startswith("_") else name)
    if op_def is None and name[:1].isupper():  # gen_*_ops also export the op type itself
        from asyncflow import registry

        op_def = registry.all_op_defs().get(name)
    if op_def is None:
        raise AttributeError(name)
    from asyncflow import graph

    # TF's generated functions take the inputs, then the attrs no input determines, in
    # order (stack_pop_v2(handle, elem_type)).
    inferred = {a.type_attr for a in op_def.inputs} | {a.number_attr for a in op_def.inputs}
    free_attrs = [k for k in op_def.attrs if k not in inferred]

    def build(*args, name=None, **kwargs):
        inputs = list(args[: len(op_def.inputs)])
        for a in op_def.inputs[len(inputs) :]:
            if a.name not in kwargs:
                raise TypeError(f"{op_def.name} needs input {a.name!r}")
            inputs.append(kwargs.pop(a.name))
        for k, v in zip(free_attrs, args[len(op_def.inputs) :]):
            kwargs[k] = v
        attrs = {k: v for k, v in kwargs.items() if k in op_def.attrs}
        op = graph.apply_op(op_def.name, inputs, attrs=attrs, name=name)
        outs = op.outputs
        if not outs:
            return op
        return outs[0] if len(outs) == 1 else outs

    build.__name__ = name
    return build


def _namespaces():
    af = _af()
    return [
        af,
        af.nn,
        af.math,
        af.linalg,
        af.sparse,
        af.strings,
        af.random,
        af.image,
        af.train,
        af.io,
        af.errors,
        af.dtypes,
    ]


def _resolve(sources, name):
    for src in sources:
        if src is None:
            continue
        if isinstance(src, dict):
            if name in src:
                return src[name]
            continue
        try:
            return getattr(src, name)
        except AttributeError:
            continue
    raise AttributeError(name)


# TF's packages (as opposed to modules): an attribute of one is its submodule.
_PACKAGES = {
    "python",
    "framework",
    "ops",
    "platform",
    "eager",
    "util",
    "client",
    "training",
    "core",
    "kernel_tests",
    "lib",
    "io",
    "data",
    "example",
    "protobuf",
    "summary",
    "nn_ops",
    "math_ops",
    "array_ops",
    "sparse_ops",
    "random",
    "signal",
    "image_ops",
    "variables",
    "control_flow",
    "data_structures",
    "linalg",
    "strings_ops",
    "io_ops",
    "distributions",
    "proto",
    "module",
    "layers",
}


def _is_package(fullname: str) -> bool:
    parts = fullname.split(".")
    if fullname == "tensorflow":
        return True
    if "kernel_tests" in parts:
        return parts[-1] in _PACKAGES
    if parts[-1] in ("ops", "framework") and len(parts) >= 3 and parts[-2] == "core":
        return True
    if parts[-2:] == ["lib", "io"]:  # tensorflow.python.lib.io.tf_record
        return True
    if parts[-2:] == ["ops", "ragged"]:  # tensorflow.python.ops.ragged.ragged_tensor
        return True
    if len(parts) == 4 and parts[2] == "data":  # tensorflow.python.data.ops.dataset_ops
        return True
    if parts[2:] == ["data", "experimental", "ops"]:  # ...data.experimental.ops.cardinality
        return True
    return len(parts) <= 3 and parts[-1] in _PACKAGES


class _Resolver(types.ModuleType):
    """A module whose attributes are looked up, in order, in `_sources`."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if self.__name__ != "tensorflow" and _is_package(self.__name__):
            return importlib.import_module(f"{self.__name__}.{name}")
        value = _resolve(self._sources(), name)
        self.__dict__[name] = value
        return value

    def __setattr__(self, name, value):
        # A test patching `random_ops.truncated_normal` (mock.patch.object) patches the
        # asyncflow family module the name comes from, where asyncflow's callers look;
        # setting the original back, or deleting the patch, restores it there.
        family = self.__dict__.get("_family")
        if family is not None and not name.startswith("_") and hasattr(family, name):
            if name not in self.__dict__ or self.__dict__[name] is getattr(family, name):
                self.__dict__.setdefault("_originals", {}).setdefault(name, getattr(family, name))
                setattr(family, name, value)
                if value is self._originals[name]:
                    del self._originals[name]
        super().__setattr__(name, value)

    def __delattr__(self, name):
        original = self.__dict__.get("_originals", {}).pop(name, None)
        if original is not None:
            setattr(self._family, name, original)
        super().__delattr__(name)


def _family(name: str):
    spec = importlib.util.find_spec(f"asyncflow.ops.{name}")
    return importlib.import_module(f"asyncflow.ops.{name}") if spec else None


def _ops_module(fullname: str) -> types.ModuleType:
    short = fullname.rsplit(".", 1)[-1]
    mod = _Resolver(fullname)
    mod._family = None if short.startswith("gen_") else _family(short)
    af = _af()
    extra = _EXTRA.get(short, {})
    if short.startswith("gen_"):

        def sources():
            return [extra, _GenOps, _family(short[4:]), *_namespaces()]
    else:

        def sources():
            # TF keeps some nn functions in nn_ops that asyncflow has in nn_impl,
            # math_ops' reductions in asyncflow's reduction_ops and array_ops'
            # scatter_nd_non_aliasing_add in scatter_nd_ops.
            also = {
                "nn_ops": "nn_impl",
                "math_ops": "reduction_ops",
                "array_ops": "scatter_nd_ops",
            }.get(short)
            also = _family(also) if also else None
            return [extra, _family(short), also, *_namespaces(), af.compat, _GenOps, _GradFns]

    mod._sources = sources
    return mod


class _GenOpsType:
    def __getattr__(self, name):
        return _gen_op(name)


class _GradFnsType:
    """`nn_grad._XGrad` etc.: the gradient registered for op type X."""

    def __getattr__(self, name):
        m = re.fullmatch(r"_(\w+)Grad", name)
        if m is None:
            raise AttributeError(name)
        from asyncflow import registry

        try:
            fn = registry.get_op_def(m.group(1)).grad_fn
        except (KeyError, LookupError, ValueError) as e:
            raise AttributeError(name) from e
        if fn is None:
            raise AttributeError(name)
        return fn


_GradFns = _GradFnsType()


_GenOps = _GenOpsType()


def _extra_tables():
    """Names TF keeps in a module where asyncflow's live elsewhere or differ."""
    af = _af()
    from asyncflow import graph as g
    from asyncflow import test_util as tu

    def convert_n_to_tensor(values, dtype=None, name=None, preferred_dtype=None):
        return [g.convert_to_tensor(v, dtype=dtype) for v in values]

    class _Context:
        def executing_eagerly(self):
            return False

    context = {
        "executing_eagerly": lambda: False,
        "in_eager_mode": lambda: False,
        "graph_mode": contextlib.nullcontext,
        "context": lambda: _Context(),
        "eager_mode": _no_eager,
    }
    return {
        "ops": {
            "convert_n_to_tensor": convert_n_to_tensor,
            "_default_graph_stack": None,
            "EagerTensor": type("EagerTensor", (), {}),
        },
        "gradient_checker": {
            "compute_gradient": tu.compute_gradient,
            "compute_gradient_error": tu.compute_gradient_error,
        },
        "gradient_checker_v2": {
            "compute_gradient": _v2_compute_gradient,
            "max_error": _v2_max_error,
            "_to_numpy": _v2_to_numpy,
        },
        "gradients_impl": {"gradients": af.gradients},
        "gradients": {"gradients": af.gradients},
        "context": context,
        # tf.function called in graph mode: the Python function runs where it is called
        # (asyncflow has no function tracing; graph mode builds into the default graph).
        "def_function": {"function": _graph_function},
        "compat": {
            "as_bytes": _as_bytes,
            "as_text": _as_text,
            "as_str": _as_text,
            "as_str_any": lambda v: v.decode() if isinstance(v, bytes) else str(v),
            "bytes_or_text_types": (bytes, str),
            "integral_types": (int, np.integer),
            "real_types": (float, int, np.floating, np.integer),
            "complex_types": (complex, np.number),
            "collections_abc": importlib.import_module("collections.abc"),
        },
        "constant_op": {"constant": af.constant},
        "errors": vars(af.errors),
        "errors_impl": vars(af.errors),
        "dtypes": vars(af.dtypes),
        "tensor_shape": vars(importlib.import_module("asyncflow.tensor_shape")),
        "sparse_tensor": vars(importlib.import_module("asyncflow.sparse_tensor")),
        "indexed_slices": vars(importlib.import_module("asyncflow.indexed_slices")),
        "random_seed": vars(importlib.import_module("asyncflow.random_seed")),
        "nest": vars(importlib.import_module("asyncflow.nest")),
        "variables": vars(importlib.import_module("asyncflow.variables")),
        # asyncflow's Variable is TF1's ref variable.
        "ref_variable": {"RefVariable": af.Variable},
        "resource_variable_ops": {
            **vars(importlib.import_module("asyncflow.ops.resource_variable_ops")),
            **vars(importlib.import_module("asyncflow.resource_variable")),
        },
        "variable_scope": vars(importlib.import_module("asyncflow.var_scope")),
        # tf.config (a TF2 module): op determinism is a switch asyncflow's kernels do
        # not need (they have one order of accumulation each).
        "config": {
            "enable_op_determinism": _determinism.enable,
            "disable_op_determinism": _determinism.disable,
            "is_op_determinism_enabled": _determinism.enabled,
            "list_physical_devices": lambda *a: [],
            "list_logical_devices": lambda *a: [],
        },
        "session": {"Session": af.Session, "InteractiveSession": af.InteractiveSession},
        # asyncflow is TF1: TF2 behaviour is off.
        "tf2": {"enabled": lambda: False},
        # asyncflow keeps TensorArray's gradients with its ops.
        "tensor_array_grad": vars(importlib.import_module("asyncflow.ops.tensor_array_ops")),
        # asyncflow's control flow is TF1's (Switch/Merge/Enter/Exit frames).
        "control_flow_util": {
            **vars(importlib.import_module("asyncflow.ops.control_flow_contexts")),
            "ENABLE_CONTROL_FLOW_V2": False,
        },
        "tf_logging": vars(importlib.import_module("asyncflow.tf_logging")),
        # wrap_function (TF1 functions as a graph's callable): built where it is called,
        # as def_function.function here; a session prunes what the result needs.
        "wrap_function": {"wrap_function": _wrap_function},
        # framework.function.Defun (TF1's graph functions, not public API): the body
        # built where it is called, its arguments cast to the declared types.
        "function": {"Defun": _Defun},
        # tensorflow.python.client.device_lib
        "device_lib": vars(importlib.import_module("asyncflow.device_lib")),
        # tensorflow.python.ops.ragged.*: what asyncflow.ragged has of TF's ragged API.
        "ragged_tensor": vars(importlib.import_module("asyncflow.ragged")),
        "ragged_factory_ops": vars(importlib.import_module("asyncflow.ragged")),
        "ragged_concat_ops": vars(importlib.import_module("asyncflow.ragged")),
        # tensorflow.python.layers.convolutional: tf.compat.v1.layers' conv functions.
        "convolutional": vars(af.layers),
    }


def _v2_compute_gradient(f, x, delta=None):
    """`gradient_checker_v2.compute_gradient` in graph mode (TF's test utility, not an
    op): Jacobians [y_size, x_size] of f at the values of x, by asyncflow's
    `compute_gradient` on placeholders standing for x."""
    af = _af()
    if not isinstance(x, list | tuple):
        raise ValueError("`x` must be a list or tuple of values convertible to a Tensor")
    vals = []
    for v in x:
        if isinstance(v, af.Tensor | af.Variable):
            sess = af.get_default_session()
            if sess is None or sess.graph is not v.graph:
                with af.Session(graph=v.graph) as tmp:
                    vals.append(np.asarray(tmp.run(v)))
            else:
                vals.append(np.asarray(sess.run(v)))
        else:
            vals.append(np.asarray(v))
    phs = [af.placeholder(af.as_dtype(v.dtype), v.shape) for v in vals]
    y = f(*phs)
    y_shape = y.shape.as_list() if y.shape.is_fully_defined() else None
    if y_shape is None:
        with af.Session(graph=y.graph) as tmp:
            y_shape = list(np.shape(tmp.run(y, dict(zip(phs, vals, strict=True)))))
    pairs = af.test.compute_gradient(
        phs,
        [list(v.shape) for v in vals],
        y,
        y_shape,
        x_init_value=vals,
        delta=delta or 1.0 / 1024,
    )
    return (tuple(np.asarray(t).T for t, _ in pairs), tuple(np.asarray(n).T for _, n in pairs))


def _v2_to_numpy(a):
    """TF's gradient_checker_v2._to_numpy: an IndexedSlicesValue as its dense array."""
    if all(hasattr(a, k) for k in ("indices", "values", "dense_shape")):
        out = np.zeros(a.dense_shape, np.asarray(a.values).dtype)
        np.add.at(out, np.asarray(a.indices), np.asarray(a.values))
        return out
    return np.asarray(a)


def _v2_max_error(grad1, grad2):
    err = 0.0
    for a, b in zip(grad1, grad2, strict=True):
        if np.size(a):
            err = max(err, float(np.max(np.abs(np.asarray(a) - np.asarray(b)))))
    return err


def _graph_function(func=None, input_signature=None, **_kwargs):
    """`def_function.function` for graph-mode cases: the function itself, its arguments
    given the signature's dtypes and (static) shapes as a traced function's are."""

    def wrap(f):
        if input_signature is None:
            return f
        af = _af()

        @functools.wraps(f)
        def call(*args, **kwargs):
            args = [
                af.placeholder_with_default(
                    af.convert_to_tensor(a, dtype=spec.dtype), shape=spec.shape
                )
                for a, spec in zip(args, input_signature, strict=False)
            ] + list(args[len(input_signature) :])
            return f(*args, **kwargs)

        return call

    return wrap(func) if func is not None else wrap


def _wrap_function(fn, signature, name=None):
    """wrap_function.wrap_function for graph-mode cases: a callable building `fn`."""

    @functools.wraps(fn)
    def call(*args):
        return fn(*args)

    return call


class _Defun:
    """function.Defun(*input_types) for graph-mode cases: calls build the body inline."""

    def __init__(self, *input_types, **_kwargs):
        self._types = input_types

    def __call__(self, fn):
        af = _af()

        @functools.wraps(fn)
        def call(*args, **kwargs):
            args = [
                af.convert_to_tensor(a, dtype=t) for a, t in zip(args, self._types, strict=False)
            ] + list(args[len(self._types) :])
            return fn(*args, **kwargs)

        return call


class _Determinism:
    """`tf.config.experimental.enable_op_determinism` and its query."""

    def __init__(self):
        self.on = False

    def enable(self):
        self.on = True

    def disable(self):
        self.on = False

    def enabled(self):
        return self.on


_determinism = _Determinism()


class _AbstractGradientTape:
    """TF's `test_util.AbstractGradientTape`: a GradientTape, or (use_tape=False) the
    same calls over `gradients()`."""

    def __init__(self, use_tape, persistent=False):
        af = _af()
        self._tape = af.GradientTape(persistent=persistent) if use_tape else None

    def __enter__(self):
        if self._tape is not None:
            self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        if self._tape is not None:
            return self._tape.__exit__(*exc)
        return False

    def watch(self, t):
        if self._tape is not None:
            self._tape.watch(t)

    def gradient(self, target, sources, output_gradients=None):
        if self._tape is not None:
            return self._tape.gradient(target, sources, output_gradients)
        return _af().gradients(target, sources, output_gradients)


def _no_eager():
    # A case run under `context.eager_mode()` is not graph mode: TF2-only, not counted.
    raise unittest.SkipTest("TF2-only: eager mode (asyncflow has graph mode only)")


def _as_bytes(v, encoding="utf-8"):
    return v if isinstance(v, bytes) else str(v).encode(encoding)


def _as_text(v, encoding="utf-8"):
    return v.decode(encoding) if isinstance(v, bytes) else str(v)


_EXTRA: dict = {}


class _ShimFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve `tensorflow[.python[...]]` (and `absl.testing` when absent) to the shim."""

    def __init__(self, kernel_test_dirs: list[str]):
        self.kernel_test_dirs = kernel_test_dirs
        self.six_missing = importlib.util.find_spec("six") is None  # (before installing)

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "tensorflow" or fullname.startswith("tensorflow."):
            if ".kernel_tests." in fullname + ".":
                src = self._kernel_test_source(fullname)
                if src is not None:
                    is_pkg = src.endswith("__init__.py")
                    return importlib.util.spec_from_file_location(
                        fullname,
                        src,
                        submodule_search_locations=[os.path.dirname(src)] if is_pkg else None,
                    )
            if fullname.endswith("_test_base"):  # TF's shared test classes, e.g.
                src = self._package_source(fullname)  # ops/image_grad_test_base.py
                if src is not None:
                    return importlib.util.spec_from_file_location(fullname, src)
            return importlib.util.spec_from_loader(
                fullname, self, is_package=_is_package(fullname)
            )
        if fullname in (
            "absl",
            "absl.testing",
            "absl.testing.parameterized",
            "absl.testing.absltest",
            "absl.flags",
            "absl.logging",
        ):
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        if fullname in ("six", "six.moves") and self.six_missing:
            # Older kernel tests import six.moves.xrange (Python 3's range).
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def _package_source(self, fullname):
        rel = fullname.split(".", 1)[1].replace(".", os.sep) + ".py"
        for root in self.kernel_test_dirs:  # .../tensorflow/python/kernel_tests
            cand = os.path.join(os.path.dirname(os.path.dirname(root)), rel)
            if os.path.isfile(cand):
                return cand
        return None

    def _kernel_test_source(self, fullname):
        rel = fullname.split(".kernel_tests", 1)[1].lstrip(".").replace(".", os.sep)
        for root in self.kernel_test_dirs:
            for cand in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
                if os.path.isfile(cand):
                    return cand
            if not rel and os.path.isdir(root):
                init = os.path.join(root, "__init__.py")
                return init if os.path.isfile(init) else None
        return None

    def create_module(self, spec):
        name = spec.name
        if name.startswith("absl"):
            return _absl_module(name)
        if name in ("six", "six.moves"):
            mod = types.ModuleType(name)
            mod.__path__ = []
            mod.xrange, mod.range, mod.zip = range, range, zip
            return mod
        if name == "tensorflow":
            mod = _Resolver(name)
            af = _af()
            mod._sources = lambda: [{"compat": _compat_module()}, af]
            mod.__path__ = []
            return mod
        if name.endswith("platform.test") or name.endswith("platform.googletest"):
            return _test_module(name)
        if name.endswith("framework.test_util"):
            return _test_util_module(name)
        return _ops_module(name)

    def exec_module(self, module):
        pass


def _compat_module():
    af = _af()
    mod = types.ModuleType("tensorflow.compat")
    mod.v1 = af
    mod.as_bytes = _as_bytes
    mod.as_text = _as_text
    return mod


# -- absl.testing.parameterized, when absl is not installed -------------------------------


def _absl_module(name):
    mod = types.ModuleType(name)
    mod.__path__ = []
    if name == "absl.testing.parameterized":
        mod.parameters = _parameters(named=False)
        mod.named_parameters = _parameters(named=True)
        mod.product = _product
        mod.TestCase = _ParameterizedTestCase
    elif name == "absl.testing.absltest":
        mod.TestCase = unittest.TestCase
        mod.main = unittest.main
    elif name == "absl.logging":
        import logging

        mod.__dict__.update({k: getattr(logging, k) for k in ("info", "warning", "error")})
        mod.vlog = lambda *a, **k: None
    return mod


class _ParameterizedTestCase(unittest.TestCase):
    """absl's `parameterized.TestCase`: its own class, so that a test listing it before
    `test.TestCase` (a TestCase subclass) still has a consistent MRO."""


def _product(**kwargs):
    keys = list(kwargs)
    return [
        dict(zip(keys, vals, strict=True))
        for vals in itertools.product(*(kwargs[k] for k in keys))
    ]


def _parameters(named: bool):
    def decorator_factory(*cases):
        # absl: one argument that is neither a tuple nor a mapping is the iterable of
        # cases (a list of dicts, a set of flags...).
        if (
            len(cases) == 1
            and not isinstance(cases[0], tuple | dict | str | bytes)
            and hasattr(cases[0], "__iter__")
        ):
            cases = tuple(cases[0])

        def decorate(fn):
            fn._param_cases = (cases, named)
            return fn

        return decorate

    return decorator_factory


def _expand_parameterized(cls):
    """absl's metaclass work: one method per case, named as absl names them."""
    for attr, fn in list(vars(cls).items()):
        spec = getattr(fn, "_param_cases", None)
        if spec is None:
            continue
        cases, named = spec
        delattr(cls, attr)
        for i, case in enumerate(cases):
            if named:
                if isinstance(case, dict):
                    case = dict(case)
                    suffix = case.pop("testcase_name")
                    args, kwargs = (), case
                else:
                    suffix, args, kwargs = case[0], tuple(case[1:]), {}
                mname = attr + str(suffix)
            else:
                args, kwargs = (
                    ((), case)
                    if isinstance(case, dict)
                    else ((case if isinstance(case, tuple | list) else (case,)), {})
                )
                mname = f"{attr}{i}"

            def method(self, _fn=fn, _a=args, _k=kwargs):
                return _fn(self, *_a, **_k)

            method.__name__ = mname
            setattr(cls, mname, method)
    return cls


# -- tensorflow.python.framework.test_util / platform.test --------------------------------


def _flex(transform):
    """A decorator usable bare (`@d`) or called (`@d("reason")`, `@d(config=...)`)."""

    def outer(*args, **kwargs):
        if (
            len(args) == 1
            and not kwargs
            and callable(args[0])
            and (isinstance(args[0], type) or isinstance(args[0], types.FunctionType))
        ):
            return transform(args[0])
        return transform

    return outer


def _for_methods(transform):
    def apply(obj):
        if isinstance(obj, type):
            for k, v in list(vars(obj).items()):
                if k.startswith("test") and callable(v):
                    setattr(obj, k, transform(v))
            return obj
        return transform(obj)

    return apply


def _as_function_and_v1_graph(fn):
    """TF's build_as_function_and_v1_graph: `<name>_function` (built in a tf.function:
    TF2-only, skipped and not counted) and `<name>_v1_graph` (a v1 graph)."""

    def case(self, as_function):
        if as_function:
            raise unittest.SkipTest("TF2-only: built as a tf.function")
        return fn(self)

    case._param_cases = ((("_function", True), ("_v1_graph", False)), True)
    return case


def _skipper(reason):
    def transform(fn):
        @functools.wraps(fn)
        def skipped(*a, **k):
            raise unittest.SkipTest(reason)

        return skipped

    return transform


class TensorFlowTestCase(unittest.TestCase):
    """A graph-mode subset of TF's `test_util.TensorFlowTestCase`."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _expand_parameterized(cls)

    def setUp(self):
        af = _af()
        af.reset_default_graph()
        af.set_random_seed(87654321)
        np.random.seed(87654321)
        self._cached = {}

    def tearDown(self):
        for s in self._cached.values():
            s.close()

    def get_temp_dir(self):
        if not hasattr(self, "_tmp"):
            self._tmp = tempfile.mkdtemp()
        return self._tmp

    def _session_cm(self, graph, cached, config=None):
        af = _af()
        graph = graph if graph is not None else af.get_default_graph()
        if cached:
            sess = self._cached.get(id(graph))
            if sess is None:
                sess = self._cached[id(graph)] = af.Session(graph=graph, config=config)
        else:
            sess = af.Session(graph=graph, config=config)

        @contextlib.contextmanager
        def cm():
            try:
                with graph.as_default(), sess.as_default():
                    yield sess
            finally:
                if not cached:
                    sess.close()

        return cm()

    def cached_session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        return self._session_cm(graph, cached=True, config=config)

    def session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        return self._session_cm(graph, cached=False, config=config)

    def test_session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        return self._session_cm(graph, cached=True)

    @contextlib.contextmanager
    def test_scope(self):
        yield

    def _run(self, tensors):
        af = _af()
        sess = af.get_default_session()
        if sess is None:
            g = af.get_default_graph()
            sess = self._cached.get(id(g)) or self._cached.setdefault(id(g), af.Session(graph=g))
        return sess.run(tensors)

    def evaluate(self, tensors):
        return self._run(tensors)

    def _nd(self, a):
        af = _af()
        if isinstance(a, af.Tensor | af.Variable) or type(a).__name__ in (
            "SparseTensor",
            "IndexedSlices",
        ):
            a = self._run(a)
        if not isinstance(a, np.ndarray):
            a = np.array(a)
        if a.dtype.names is not None and len(a.dtype.names) == 1:
            a = a[a.dtype.names[0]]  # quantized values (qint8...) compare as their ints
        return a

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        af = _af()
        a, b = (self._run(x) if isinstance(x, af.Tensor | af.Variable) else x for x in (a, b))
        if isinstance(a, dict) or isinstance(b, dict):
            self.assertEqual(set(a), set(b), msg)
            for k in a:
                self.assertAllClose(a[k], b[k], rtol, atol, msg)
            return
        if (
            isinstance(a, list | tuple)
            and a
            and not _is_numeric_seq(a)
            or (isinstance(b, list | tuple) and b and not _is_numeric_seq(b))
        ):
            self.assertEqual(len(a), len(b), msg)
            for x, y in zip(a, b, strict=True):
                self.assertAllClose(x, y, rtol, atol, msg)
            return
        a, b = self._nd(a), self._nd(b)
        self.assertEqual(a.shape, b.shape, f"shape mismatch {a.shape} vs {b.shape} {msg}")
        if a.dtype.kind in "OSU" or b.dtype.kind in "OSU":
            np.testing.assert_array_equal(a, b, err_msg=msg or "")
            return
        a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        b64 = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        np.testing.assert_allclose(
            a64, b64, rtol=rtol, atol=atol, err_msg=msg or "", equal_nan=True
        )

    def assertAllCloseAccordingToType(
        self,
        a,
        b,
        rtol=1e-6,
        atol=1e-6,
        float_rtol=1e-6,
        float_atol=1e-6,
        half_rtol=1e-3,
        half_atol=1e-3,
        bfloat16_rtol=1e-2,
        bfloat16_atol=1e-2,
        msg=None,
    ):
        a, b = self._nd(a), self._nd(b)
        names = {a.dtype.name, b.dtype.name}
        if names & {"float32", "complex64"}:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if "float16" in names:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        if "bfloat16" in names:
            rtol, atol = max(rtol, bfloat16_rtol), max(atol, bfloat16_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def _GetNdArray(self, a):
        return a if isinstance(a, np.ndarray) else np.array(a)

    def assertNotAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        try:
            self.assertAllClose(a, b, rtol, atol)
        except AssertionError:
            return
        raise AssertionError(msg or "the two values are close")

    def assertAllEqual(self, a, b, msg=None):
        from asyncflow import ragged

        if ragged.is_ragged(a) or ragged.is_ragged(b):
            return self._assertRaggedEqual(a, b, msg)
        a, b = self._nd(a), self._nd(b)
        if a.size and b.size:
            self.assertEqual(a.shape, b.shape, f"shape mismatch {a.shape} vs {b.shape} {msg}")
        np.testing.assert_array_equal(a, b, err_msg=msg or "")

    @contextlib.contextmanager
    def captureWritesToStream(self, stream):  # noqa: N802 - TF's name
        """What is written to `stream`'s file descriptor inside the block (TF's test
        case method): `.contents()` of the value yielded, once the block is over."""
        stream.flush()
        fd = stream.fileno()
        tmp_fd, path = tempfile.mkstemp(dir=self.get_temp_dir())
        saved = os.dup(fd)
        os.dup2(tmp_fd, fd)
        captured = types.SimpleNamespace(contents=lambda: open(path).read())
        try:
            yield captured
        finally:
            stream.flush()
            os.dup2(saved, fd)
            os.close(saved)
            os.close(tmp_fd)

    def _ragged_list(self, x):
        af = _af()
        if isinstance(x, af.RaggedTensor | af.Tensor | af.Variable):
            x = self._run(x)
        if hasattr(x, "to_list"):
            return x.to_list()
        return x.tolist() if isinstance(x, np.ndarray | np.generic) else x

    def _assertRaggedEqual(self, a, b, msg=None):
        """As TF's test case: equal as nested lists, and of one ragged_rank (a dense
        value's is 0) unless either is a Python list."""
        from asyncflow import ragged

        self.assertEqual(self._ragged_list(a), self._ragged_list(b), msg)
        if not (isinstance(a, list | tuple) or isinstance(b, list | tuple)):
            ranks = [x.ragged_rank if ragged.is_ragged(x) else 0 for x in (a, b)]
            self.assertEqual(ranks[0], ranks[1], msg)

    def assertNotAllEqual(self, a, b, msg=None):
        a, b = self._nd(a), self._nd(b)
        self.assertFalse(a.shape == b.shape and np.all(a == b), msg)

    def assertArrayNear(self, farray1, farray2, err, msg=None):
        self.assertEqual(len(farray1), len(farray2), msg)
        for f1, f2 in zip(farray1, farray2, strict=True):
            self.assertNear(float(f1), float(f2), err, msg)

    def assertNear(self, f1, f2, err, msg=None):
        self.assertTrue(f1 == f2 or abs(f1 - f2) <= err, f"{f1} != {f2} +/- {err} {msg}")

    def assertAllInRange(self, target, lower, upper, open_lower=False, open_upper=False):
        t = self._nd(target)
        self.assertTrue(np.all(t > lower if open_lower else t >= lower))
        self.assertTrue(np.all(t < upper if open_upper else t <= upper))

    def assertAllInSet(self, target, expected_set):
        self.assertTrue(set(np.unique(self._nd(target)).tolist()) <= set(expected_set))

    def assertAllGreater(self, a, c):
        self.assertTrue(np.all(self._nd(a) > c))

    def assertAllLess(self, a, c):
        self.assertTrue(np.all(self._nd(a) < c))

    def assertAllGreaterEqual(self, a, c):
        self.assertTrue(np.all(self._nd(a) >= c))

    def assertAllLessEqual(self, a, c):
        self.assertTrue(np.all(self._nd(a) <= c))

    def assertShapeEqual(self, np_array, tf_tensor, msg=None):
        self.assertEqual(list(np_array.shape), tf_tensor.get_shape().as_list(), msg)

    def assertDTypeEqual(self, target, expected_dtype):
        self.assertEqual(self._nd(target).dtype, np.dtype(expected_dtype))

    def assertDeviceEqual(self, device1, device2, msg=None):
        self.assertEqual(device1 or "", device2 or "", msg)

    @contextlib.contextmanager
    def assertRaisesWithPredicateMatch(self, exception_type, expected_err_re_or_predicate):
        if callable(expected_err_re_or_predicate):
            predicate = expected_err_re_or_predicate
        else:

            def predicate(e):
                msg = getattr(e, "message", None) or str(e)
                return re.search(expected_err_re_or_predicate, msg) is not None

        try:
            yield
        except exception_type as e:
            if not predicate(e):
                raise AssertionError(
                    f"{type(e).__name__} {e!s:.300} does not match "
                    f"{expected_err_re_or_predicate!r}"
                ) from e
            return
        raise AssertionError(f"{exception_type} not raised")

    def assertRaisesOpError(self, expected_err_re_or_predicate):
        return self.assertRaisesWithPredicateMatch(
            _af().errors.OpError, expected_err_re_or_predicate
        )

    def assertRaisesIncompatibleShapesError(self, exception_type=None):
        exception_type = exception_type or _af().errors.InvalidArgumentError
        return self.assertRaisesWithPredicateMatch(
            exception_type,
            r"Incompatible shapes|Dimensions must be equal|"
            r"required broadcastable shapes",
        )

    assertRaisesRegexp = unittest.TestCase.assertRaisesRegex
    assertItemsEqual = unittest.TestCase.assertCountEqual

    def assertLen(self, container, expected_len, msg=None):
        self.assertEqual(len(container), expected_len, msg)

    def assertEmpty(self, container, msg=None):
        self.assertEqual(len(container), 0, msg)

    def assertNotEmpty(self, container, msg=None):
        self.assertNotEqual(len(container), 0, msg)

    def assertStartsWith(self, actual, expected_start, msg=None):
        self.assertTrue(actual.startswith(expected_start), msg)

    def assertSameElements(self, a, b, msg=None):
        self.assertEqual(set(a), set(b), msg)

    def assertProtoEquals(self, expected, message, msg=None):
        from google.protobuf import text_format

        if isinstance(expected, str):
            expected = text_format.Parse(expected, type(message)())
        self.assertEqual(expected, message, msg)

    def checkedThread(self, target, args=None, kwargs=None):
        return _CheckedThread(self, target, args, kwargs)


def _is_numeric_seq(seq):
    return all(
        isinstance(x, int | float | complex | bool | np.number | np.bool_)
        or (isinstance(x, list | tuple) and _is_numeric_seq(x))
        for x in seq
    )


class _CheckedThread:
    def __init__(self, testcase, target, args, kwargs):
        self._target, self._args, self._kwargs = target, args or (), kwargs or {}
        self._exc = None
        self._thread = threading.Thread(target=self._protected_run, daemon=True)

    def _protected_run(self):
        try:
            self._target(*self._args, **self._kwargs)
        except Exception as e:  # noqa: BLE001 - re-raised in join()
            self._exc = e

    def start(self):
        self._thread.start()

    def join(self):
        self._thread.join()
        if self._exc is not None:
            raise self._exc

    def is_alive(self):
        return self._thread.is_alive()

    def check_termination(self):
        if self._thread.is_alive():
            raise AssertionError("thread still running")


def _test_util_module(name):
    mod = _Resolver(name)
    passthrough = _flex(lambda f: f)
    table = {
        "TensorFlowTestCase": TensorFlowTestCase,
        "run_deprecated_v1": _for_methods(lambda f: f),
        "deprecated_graph_mode_only": _for_methods(lambda f: f),
        "run_all_in_deprecated_graph_mode_only": _for_methods(lambda f: f),
        "run_in_graph_and_eager_modes": passthrough,
        "run_all_in_graph_and_eager_modes": lambda cls: cls,
        "run_v1_only": passthrough,
        "run_v2_only": _flex(_skipper("TF2-only")),
        "run_cuda_only": _flex(_skipper("needs CUDA")),
        "run_gpu_only": _flex(_skipper("needs a GPU")),
        "build_as_function_and_v1_graph": _as_function_and_v1_graph,
        "also_run_as_tf_function": passthrough,
        "with_eager_op_as_function": passthrough,
        "run_without_tensor_float_32": passthrough,
        "run_all_without_tensor_float_32": passthrough,
        "assert_no_new_pyobjects_executing_eagerly": passthrough,
        "assert_no_garbage_created": passthrough,
        "assert_no_new_tensors": passthrough,
        "with_forward_compatibility_horizons": passthrough,
        "for_all_test_methods": lambda deco, *a, **k: _for_methods(deco(*a, **k)),
        "generate_combinations_with_testcase_name": _combinations,
        "IsMklEnabled": lambda: False,
        "IsBuiltWithROCm": lambda: False,
        "IsBuiltWithNvcc": lambda: False,
        "is_xla_enabled": lambda: False,
        "is_built_with_rocm": lambda: False,
        "GpuSupportsHalfMatMulAndConv": lambda: False,
        "is_gpu_available": lambda *a, **k: False,
        "gpu_device_name": lambda: "",
        "use_gpu": contextlib.nullcontext,
        "force_cpu": contextlib.nullcontext,
        "force_gpu": contextlib.nullcontext,
        "device": lambda use_gpu=False: contextlib.nullcontext(),
        "skip_if": lambda cond: lambda f: f,
        "enable_control_flow_v2": passthrough,
        "disable_control_flow_v2": _flex(_mark_no_cf_v2),
        "with_control_flow_v2": _with_control_flow_v2,
        "AbstractGradientTape": _AbstractGradientTape,
        "xla_allow_fallback": passthrough,
        "set_xla_env_flag": passthrough,
    }

    def sources():
        return [table, _DISABLES]

    mod._sources = sources
    return mod


def _mark_no_cf_v2(fn):
    fn._disable_control_flow_v2 = True
    return fn


def _with_control_flow_v2(cls):
    """TF's decorator adds a `<name>WithControlFlowV2` copy of each test run under
    control flow v2, TF2's functional While/If. asyncflow implements TF1's control flow
    only: the copies are TF2-only cases, skipped (and not counted)."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("test") and callable(fn):
            if getattr(fn, "_disable_control_flow_v2", False):
                continue
            setattr(cls, name + "WithControlFlowV2", _skipper("TF2-only: control flow v2")(fn))
    return cls


class _Disables:
    def __getattr__(self, name):
        if name.startswith(("disable_", "enable_", "skip_if_", "no_xla")):
            return _flex(lambda f: f)
        raise AttributeError(name)


_DISABLES = _Disables()


def _combinations(**kwargs):
    cases = _product(**kwargs)
    for c in cases:
        c["testcase_name"] = "_" + "_".join(f"{k}_{v}" for k, v in c.items())
    return cases


def _test_module(name):
    mod = _Resolver(name)
    from unittest import mock

    af = _af()
    table = {
        "TestCase": TensorFlowTestCase,
        "main": lambda *a, **k: None,
        "mock": mock,
        "Benchmark": type("Benchmark", (), {}),
        "get_temp_dir": tempfile.gettempdir,
        "is_gpu_available": lambda *a, **k: False,
        "gpu_device_name": lambda: "",
        "is_built_with_cuda": lambda: False,
        "is_built_with_rocm": lambda: False,
        "is_built_with_gpu_support": lambda: False,
        "compute_gradient": af.test.compute_gradient,
        "compute_gradient_error": af.test.compute_gradient_error,
        "disable_with_predicate": lambda pred, skip_message: lambda f: f,
    }
    mod._sources = lambda: [table]
    return mod


def install_shim(kernel_test_dirs: list[str]) -> None:
    _EXTRA.update(_extra_tables())
    sys.meta_path.insert(0, _ShimFinder(kernel_test_dirs))


# -- running one file ----------------------------------------------------------------------


class _Alarm(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Alarm("case timed out")


def _cases(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _cases(t)
        else:
            yield t


class _Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.status, self.message = "pass", ""

    def addFailure(self, test, err):
        self.status, self.message = "fail", _fmt(err)

    def addError(self, test, err):
        self.status, self.message = "error", _fmt(err)

    def addSkip(self, test, reason):
        self.status, self.message = "skip", reason

    def addExpectedFailure(self, test, err):
        self.status = "skip"

    def addUnexpectedSuccess(self, test):
        self.status = "fail"

    def addSubTest(self, test, subtest, err):
        if err is not None and self.status == "pass":
            self.status, self.message = "fail", _fmt(err)


def _fmt(err):
    return f"{err[0].__name__}: {str(err[1])[:400]}"


def _kernel_test_dirs(path: str) -> list[str]:
    dirs = [d for d in os.environ.get("TF_KERNEL_TESTS_DIRS", "").split(os.pathsep) if d]
    parts = os.path.abspath(path).split(os.sep)
    if "kernel_tests" in parts:
        dirs.append(os.sep.join(parts[: len(parts) - parts[::-1].index("kernel_tests")]))
    return dirs


def run_file(path: str, backend: str, timeout: float, out: str, skip=()) -> int:
    if backend == "tf":
        import tensorflow as tf

        tf.compat.v1.disable_v2_behavior()
        # Many files add their generated cases under `if __name__ == "__main__":` and
        # then call test.main(); the file runs as __main__ with main() a no-op.
        from tensorflow.python.platform import test as tf_test

        tf_test.main = lambda *a, **k: None
    else:
        install_shim(_kernel_test_dirs(path))
    spec = importlib.util.spec_from_file_location("__main__", path)
    module = importlib.util.module_from_spec(spec)
    results = {}

    def dump():
        with open(out, "w") as f:
            json.dump(results, f)

    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the whole file fails to import
        results["<import>"] = {"status": "error", "message": f"{type(e).__name__}: {e}"}
        dump()
        return 1
    suite = unittest.TestLoader().loadTestsFromModule(module)
    signal.signal(signal.SIGALRM, _on_alarm)
    for case in _cases(suite):
        cid = f"{type(case).__name__}.{case._testMethodName}"
        if (
            type(case).__name__
            in (
                "_FailedTest",
                "ModuleImportFailure",
            )
            or case._testMethodName in ("test_session", "test_scope")
            or cid in skip
        ):
            continue
        # A case that kills the process (TF aborts on some bad inputs) is the one marked
        # "running": the parent records it as crashed and runs the rest again.
        results[cid] = {"status": "running", "message": ""}
        dump()
        res = _Result()
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            case.run(res)
        except _Alarm:
            res.status, res.message = "error", "case timed out"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        results[cid] = {"status": res.status, "message": res.message}
        dump()
    dump()
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--out", required=True)
    p.add_argument("--skip", default="", help="comma-separated case ids not to run")
    p.add_argument("file")
    a = p.parse_args()
    return run_file(a.file, a.backend, a.timeout, a.out, set(filter(None, a.skip.split(","))))


if __name__ == "__main__":
    sys.exit(main())
