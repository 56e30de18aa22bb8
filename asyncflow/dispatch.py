"""Type-based dispatch of TF APIs to user functions (TF's `tf.experimental.dispatch_for_*`).

An API supports dispatch when it is wrapped here (`add_dispatch_support`, or ragged's
dispatch wrappers, which call `dispatch`): a call that passes an ExtensionType value
(anywhere among its arguments, or in a list argument) is offered first to the targets
registered for that API (`dispatch_for_api`, matched by parameter annotations), then,
for the element-wise APIs, to the unary / binary / binary-assert handlers of the
arguments' types.  With nothing registered a call pays one global test.

Invariants: a target is registered in exactly one table (`unregister` finds it there);
`_ACTIVE` is true exactly while some table holds a target.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Sequence

__all__ = [
    "BINARY_ASSERT_APIS",
    "BINARY_ELEMENTWISE_APIS",
    "UNARY_ELEMENTWISE_APIS",
    "add_dispatch_support",
    "dispatch",
    "dispatch_key",
    "is_dispatchable",
]

# TF 2.21's element-wise API lists (dispatch._UNARY_ELEMENTWISE_APIS and the binary and
# binary-assert ones), by their tf.compat.v1 names; those asyncflow lacks are skipped.
UNARY_ELEMENTWISE_APIS = (
    "as_string", "bitwise.invert", "cast", "debugging.check_numerics", "decode_base64",
    "decode_compressed", "encode_base64", "image.adjust_brightness", "image.adjust_gamma",
    "image.convert_image_dtype", "image.random_brightness", "is_finite", "is_inf", "is_nan",
    "logical_not", "math.abs", "math.acos", "math.acosh", "math.angle", "math.asin",
    "math.asinh", "math.atan", "math.atanh", "math.bessel_i0", "math.bessel_i0e",
    "math.bessel_i1", "math.bessel_i1e", "math.ceil", "math.conj", "math.cos", "math.cosh",
    "math.digamma", "math.erf", "math.erfc", "math.erfcinv", "math.erfinv", "math.exp",
    "math.expm1", "math.floor", "math.imag", "math.lgamma", "math.log", "math.log1p",
    "math.log_sigmoid", "math.log_softmax", "math.ndtri", "math.negative", "math.nextafter",
    "math.real", "math.reciprocal", "math.reciprocal_no_nan", "math.rint", "math.round",
    "math.rsqrt", "math.sigmoid", "math.sign", "math.sin", "math.sinh", "math.softplus",
    "math.softsign", "math.special.bessel_j0", "math.special.bessel_j1",
    "math.special.bessel_k0", "math.special.bessel_k0e", "math.special.bessel_k1",
    "math.special.bessel_k1e", "math.special.bessel_y0", "math.special.bessel_y1",
    "math.special.dawsn", "math.special.expint", "math.special.fresnel_cos",
    "math.special.fresnel_sin", "math.special.spence", "math.sqrt", "math.square",
    "math.tan", "math.tanh", "nn.elu", "nn.leaky_relu", "nn.relu", "nn.relu6", "nn.selu",
    "nn.silu", "ones_like", "regex_replace", "saturate_cast", "string_strip",
    "string_to_hash_bucket", "string_to_hash_bucket_fast", "string_to_hash_bucket_strong",
    "string_to_number", "strings.length", "strings.lower", "strings.regex_full_match",
    "strings.substr", "strings.unicode_script", "strings.unicode_transcode",
    "strings.upper", "substr", "to_bfloat16", "to_complex128", "to_complex64", "to_double",
    "to_float", "to_int32", "to_int64", "zeros_like", "clip_by_value", "nn.gelu",
)  # fmt: skip
BINARY_ELEMENTWISE_APIS = (
    "atan2", "bitwise.bitwise_and", "bitwise.bitwise_or", "bitwise.bitwise_xor",
    "bitwise.left_shift", "bitwise.right_shift", "complex", "div", "equal", "floordiv",
    "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
    "logical_xor", "math.add", "math.divide", "math.divide_no_nan", "math.floormod",
    "math.maximum", "math.minimum", "math.multiply", "math.multiply_no_nan",
    "math.scalar_mul", "math.xdivy", "math.xlog1py", "math.xlogy", "not_equal", "pow",
    "squared_difference", "subtract", "truediv", "zeta", "floor_div", "realdiv",
    "truncatediv", "truncatemod", "nn.sigmoid_cross_entropy_with_logits",
)  # fmt: skip
BINARY_ASSERT_APIS = (
    "assert_equal", "assert_greater", "assert_greater_equal", "assert_less",
    "assert_less_equal", "assert_near", "assert_none_equal",
)  # fmt: skip

# api -> [(checker, target)]; (x_type,) or (x_type, y_type) -> handler, per kind
_API_TARGETS: dict[Callable, list[tuple[Callable, Callable]]] = {}
_ELEMENTWISE: dict[str, dict[tuple, Callable]] = {"unary": {}, "binary": {}, "assert": {}}
_KIND_APIS: dict[str, set] = {}  # kind -> the dispatch-supporting APIs of that list
_DISPATCHABLE_TYPES: list[type] = []  # (ExtensionType registers itself)
_ACTIVE = False


def register_dispatchable_type(cls: type) -> None:
    """Values of `cls` (and subclasses) make a call look for dispatch targets."""
    _DISPATCHABLE_TYPES.append(cls)


def dispatch_key(api):
    """The dispatching function `api` calls (itself, or one it wraps: a public API may
    wrap the dispatching one, as sparse_values_map does), or None."""
    for _ in range(8):
        if api is None:
            return None
        if getattr(api, "_tf_dispatch_api", None) is api:
            return api
        api = getattr(api, "__wrapped__", None)
    return None


def is_dispatchable(api) -> bool:
    return dispatch_key(api) is not None


def add_dispatch_support(fn: Callable) -> Callable:
    """fn, offering calls with ExtensionType arguments to registered targets first."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _ACTIVE:
            result = dispatch(wrapper, args, kwargs)
            if result is not NotImplemented:
                return result
        return fn(*args, **kwargs)

    wrapper._tf_dispatch_api = wrapper
    return wrapper


def _has_dispatchable(values) -> bool:
    types = tuple(_DISPATCHABLE_TYPES)
    for v in values:
        if isinstance(v, types):
            return True
        if isinstance(v, (list, tuple)) and any(isinstance(x, types) for x in v):
            return True
    return False


def dispatch(api, args, kwargs):
    """The result of the target that takes this call of `api`, or NotImplemented.

    Raises:
      ValueError: more than one target registered with dispatch_for_api matches.
    """
    if not _has_dispatchable((*args, *kwargs.values())):
        return NotImplemented
    matches = [t for check, t in _API_TARGETS.get(api, ()) if check(args, kwargs)]
    if len(matches) > 1:
        raise ValueError(
            "Multiple dispatch targets that were registered with tf.dispatch_for "
            f"({matches[0]} and {matches[1]}) match the arguments to {api.__name__}"
        )
    if matches:
        return matches[0](*args, **kwargs)
    for kind, handlers in _ELEMENTWISE.items():
        if handlers and api in _KIND_APIS.get(kind, ()):
            result = _elementwise(kind, handlers, api, args, kwargs)
            if result is not NotImplemented:
                return result
    return NotImplemented


def _elementwise(kind, handlers, api, args, kwargs):
    params = list(_api_signature(api).parameters)
    bound = _api_signature(api).bind(*args, **kwargs).arguments
    width = 1 if kind == "unary" else 2
    operands = [bound.pop(p, None) for p in params[:width]]
    handler = next(
        (h for types, h in handlers.items() if all(map(isinstance, operands, types))), None
    )
    if handler is None:
        return NotImplemented
    name = bound.pop("name", None)
    if kind == "assert":  # (TF's assert_func is a lambda over the other arguments)
        assert_func = lambda x, y: api(x, y, **bound)  # noqa: E731
        return handler(assert_func, *operands)
    api_func = functools.partial(api, **bound) if bound else api
    from asyncflow import graph as ops  # (graph is this module's own layer)

    if name is None:
        return handler(api_func, *operands)
    with ops.name_scope(name, api.__name__, operands):
        return handler(api_func, *operands)


@functools.cache
def _api_signature(api) -> inspect.Signature:
    return inspect.signature(api)


# -- registration (TF's tf.experimental.dispatch_for_* and unregister_dispatch_for)


def _activate() -> None:
    global _ACTIVE
    _ACTIVE = bool(_API_TARGETS) or any(_ELEMENTWISE.values())


def _type_check(annotation) -> Callable:
    """isinstance against an annotation: a class, a Union of them, a List or Sequence of
    one (every element matching)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union:
        checks = [_type_check(a) for a in args]
        return lambda v: any(c(v) for c in checks)
    if origin in (list, Sequence, tuple):
        each = _type_check(args[0]) if args else (lambda v: True)
        return lambda v: isinstance(v, (list, tuple)) and all(each(x) for x in v)
    if annotation is None or annotation is type(None):
        return lambda v: v is None
    if isinstance(annotation, type):
        return lambda v: isinstance(v, annotation)
    raise TypeError(f"Type annotation {annotation} is not currently supported by dispatch.")


def _checker(api_signature: inspect.Signature, signature: dict) -> Callable:
    checks = {}
    for name, annotation in signature.items():
        if name not in api_signature.parameters:
            raise ValueError(f"signature includes annotation for unknown parameter {name!r}.")
        checks[name] = _type_check(annotation)

    def check(args, kwargs) -> bool:
        try:
            bound = api_signature.bind(*args, **kwargs).arguments
        except TypeError:
            return False
        return all(name in bound and c(bound[name]) for name, c in checks.items())

    return check


def dispatch_for_api(api, *signatures):
    """`tf.experimental.dispatch_for_api(api, *signatures)`: a decorator registering a
    target for calls of `api` whose arguments match one of `signatures` (dicts of
    parameter name to type), or else the target's own parameter annotations.

    Raises:
      ValueError: `api` does not support dispatch; the target's parameters differ from
        the API's; no signature and no annotations; a signature names an unknown
        parameter.
    """
    key = dispatch_key(api)
    if key is None:
        raise ValueError(f"{api} does not support dispatch.")
    api_signature = _api_signature(key)

    def decorator(target):
        target_signature = inspect.signature(target)
        if [(p.name, p.kind) for p in target_signature.parameters.values()] != [
            (p.name, p.kind) for p in api_signature.parameters.values()
        ]:
            raise ValueError(
                f"Dispatch function's signature {target_signature} does not match API's "
                f"signature {api_signature}."
            )
        sigs = list(signatures)
        if not sigs:
            try:  # (string annotations, under `from __future__ import annotations`)
                hints = typing.get_type_hints(target)
            except Exception:
                hints = {}
            annotated = {
                p.name: hints.get(p.name, p.annotation)
                for p in target_signature.parameters.values()
                if p.annotation is not inspect.Parameter.empty
            }
            if not annotated:
                raise ValueError(
                    "The dispatch_for_api decorator must be called with at least one "
                    "signature, or applied to a function that has type annotations on its "
                    "parameters."
                )
            sigs = [annotated]
        checks = [_checker(api_signature, s) for s in sigs]
        entries = _API_TARGETS.setdefault(key, [])
        entries.extend((c, target) for c in checks)
        _activate()
        return target

    return decorator


def _elementwise_decorator(kind: str, what: str, types: tuple, resolve: Callable):
    def decorator(handler):
        table = _ELEMENTWISE[kind]
        if types in table:
            shown = types[0] if len(types) == 1 else types
            raise ValueError(
                f"A {what} dispatch handler ({table[types]}) has already been registered for "
                f"{shown}."
            )
        _KIND_APIS.setdefault(kind, resolve(kind))
        table[types] = handler
        _activate()
        return handler

    return decorator


def unregister(target) -> None:
    """`tf.experimental.unregister_dispatch_for(target)`.

    Raises:
      ValueError: `target` was not registered by a dispatch_for_* decorator.
    """
    found = False
    for api, entries in list(_API_TARGETS.items()):
        kept = [(c, t) for c, t in entries if t is not target]
        found = found or len(kept) != len(entries)
        if kept:
            _API_TARGETS[api] = kept
        else:
            del _API_TARGETS[api]
    for table in _ELEMENTWISE.values():
        for key in [k for k, h in table.items() if h is target]:
            del table[key]
            found = True
    if not found:
        raise ValueError(
            f"Function {target} was not registered using a `@dispatch_for_*` decorator."
        )
    _activate()
