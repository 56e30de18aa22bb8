"""Symbolic differentiation: `gradients(ys, xs)` adds the ops computing d(sum ys)/dxs.

The algorithm is TF1's (gradients_util._GradientsHelper):
1. mark the ops reachable forward from xs through differentiable (floating or complex)
   tensors; the "between" ops are those also reachable backward from ys;
2. count, for each between op, how many between ops consume its outputs (pending);
3. seed ys with grad_ys (ones by default) and walk backward breadth-first: an op is
   processed once every consumer has given it its output gradients, which are summed
   (AddN for dense, concatenation for IndexedSlices); its registered gradient function
   turns them into input gradients.
Gradient ops are built under `name_scope(name)`, those of op "a/mul" under
"gradients/a/mul_grad/".

Invariants: xs that ys do not depend on (or depend on only through integer tensors or
stop_gradient) get None; ops in `stop_gradients` get their own gradient but pass none
on; an op on the path without a registered gradient raises LookupError.
"""

from __future__ import annotations

import collections
import contextlib

from asyncflow import control_flow_grad, dtypes, nest
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops, control_flow_ops, gradient_ops, manip_ops
from asyncflow.ops import control_flow_contexts as cfc
from asyncflow.ops.tensor_array_ops import TensorArray
from asyncflow.registry import get_gradient_function

__all__ = ["gradients", "hessians", "AggregationMethod", "UnconnectedGradients", "GradientTape"]


class AggregationMethod:
    """How partial gradients of one tensor are summed (TF's constants)."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


class UnconnectedGradients:
    """What `gradients` returns for an x that ys do not depend on."""

    NONE = "none"
    ZERO = "zero"


def _as_list(x) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _is_trainable(t) -> bool:
    return gradient_ops.is_trainable(t.dtype)


def _mark_reached(from_ops) -> set:
    """Ops reachable from `from_ops` through differentiable tensors."""
    reached = set()
    queue = collections.deque(from_ops)
    while queue:
        op = queue.popleft()
        if op in reached:
            continue
        reached.add(op)
        for out in op.outputs:
            if _is_trainable(out):
                queue.extend(out._consumers)
    return reached


def _between_ops(to_ops, from_ops):
    """(to_ops reachable from from_ops, the ops on some path between, in BFS order)."""
    reached = _mark_reached(from_ops)
    reachable_to_ops = {op for op in to_ops if op in reached}
    between, between_list = set(), []
    queue = collections.deque(to_ops)
    while queue:
        op = queue.popleft()
        if op in reached:
            between.add(op)
            between_list.append(op)
            reached.discard(op)
            queue.extend(t.op for t in op.inputs)
    return reachable_to_ops, between, between_list


def _pending_from(between, between_list):
    """How many ops between consume each op's outputs (the backward ready counts)."""
    pending = collections.defaultdict(int)
    for op in between_list:
        for t in op.inputs:
            if t.op in between:
                pending[t.op] += 1
    return pending


def _pending_count(to_ops, from_ops):
    reachable_to_ops, between, between_list = _between_ops(to_ops, from_ops)
    return reachable_to_ops, _pending_from(between, between_list)


def _default_grad_ys(ys, grad_ys, colocate):
    out = []
    for i, (y, gy) in enumerate(zip(ys, grad_ys)):
        if gy is None:
            if y.dtype.is_complex:
                raise TypeError(
                    f"Gradients of complex tensors ({y}) must set grad_ys (y.dtype = "
                    f"{y.dtype.name})"
                )
            with _maybe_colocate(y.op, colocate):
                shape = gradient_ops.shape(y)
                with ops.name_scope(f"grad_ys_{i}") as scope:
                    one = gradient_ops.constant(1, y.dtype)
                    gy = ops.apply_op("Fill", [shape, one], name=scope).outputs[0]
            out.append(gy)
            continue
        if isinstance(gy, IndexedSlices):
            with _maybe_colocate(y.op, colocate):
                out.append(_identity_slices(gy, f"grad_ys_{i}"))
            continue
        gy = ops.convert_to_tensor(gy, dtype=y.dtype if not isinstance(gy, ops.Tensor) else None)
        # TF 2.21's rules: a real or integer y takes a real or integer gradient (an int
        # grad_ys for a float y too), a complex y a complex one.
        if y.dtype.is_floating or y.dtype.is_integer:
            if not (gy.dtype.is_floating or gy.dtype.is_integer):
                raise TypeError(
                    f"Gradient type {gy.dtype.name} generated for real or integer-valued "
                    f"tensor {y} with type {y.dtype.name} must be real or integer"
                )
        elif y.dtype.is_complex:
            if not gy.dtype.is_complex:
                raise TypeError(
                    f"Gradient type {gy.dtype.name} generated for complex-valued tensor {y} "
                    f"with type {y.dtype.name} must be real"
                )
        elif y.dtype.base_dtype == dtypes.resource:
            if gy.dtype.base_dtype == dtypes.resource:
                raise TypeError(
                    f"Input gradient {gy} for resource tensor {y} should not be a resource"
                )
        elif y.dtype.base_dtype == dtypes.variant:
            if gy.dtype.base_dtype != dtypes.variant:
                raise TypeError(
                    f"Gradient type {gy.dtype.name} generated for variant tensor {y} with "
                    f"type {y.dtype.name} must be variant"
                )
        else:
            raise TypeError(
                f"Tensor {y} with type {y.dtype.name} must be numeric to obtain a default gradient"
            )
        if not y.shape.is_compatible_with(gy.shape):
            raise ValueError(
                f"Incompatible shapes between grad_ys and ys: {gy.shape} vs {y.shape}"
            )
        # An Identity in this call's name scope, as TF's: gradient functions that find
        # their gradient's scope from its name (TensorArray's) work whatever scope the
        # given grad_ys were made in.
        with _maybe_colocate(y.op, colocate):
            out.append(ops.apply_op("Identity", [gy], name=f"grad_ys_{i}").outputs[0])
    return out


def _identity_slices(gy: IndexedSlices, name: str) -> IndexedSlices:
    def wrap(t, suffix):
        if t is None:
            return None
        t = ops.convert_to_tensor(t)
        return ops.apply_op("Identity", [t], name=f"{name}_{suffix}").outputs[0]

    return IndexedSlices(
        wrap(gy.values, "values"), wrap(gy.indices, "indices"), wrap(gy.dense_shape, "shape")
    )


@contextlib.contextmanager
def _maybe_colocate(op, colocate: bool):
    if colocate:
        with op.graph.colocate_with(op):
            yield
    else:
        yield


def _aggregate(grads: dict, op, method) -> list:
    """Sum the partial gradients of each of op's outputs, in place in `grads[op]`."""
    out_grads = grads.setdefault(op, [[] for _ in op.outputs])
    for i, partials in enumerate(out_grads):
        if not isinstance(partials, list):
            continue  # already aggregated (an op listed twice in ys)
        partials = [g for g in partials if g is not None]
        if not partials:
            out_grads[i] = None
        elif len(partials) == 1:
            out_grads[i] = partials[0]
        elif all(isinstance(g, ops.Tensor) for g in partials):
            out_grads[i] = _add(partials, method, op)
        elif any(isinstance(g, ops.Tensor) for g in partials):
            out_grads[i] = _add([ops.convert_to_tensor(g) for g in partials], method, op)
        else:
            out_grads[i] = _concat_slices(partials)
    return out_grads


def _add(tensors, method, op):
    # TF sums pairwise for both experimental methods, in a scope named after the op
    if method in (
        AggregationMethod.EXPERIMENTAL_TREE,
        AggregationMethod.EXPERIMENTAL_ACCUMULATE_N,
    ):
        with op.graph.name_scope(op.name + "_gradient_sum"):
            total = tensors[0]
            for t in tensors[1:]:
                total = ops.apply_op("AddN", [[total, t]]).outputs[0]
        return total
    return ops.apply_op("AddN", [tensors]).outputs[0]


def _concat_slices(slices):
    idx_dtypes = {s.indices.dtype for s in slices}
    indices = [s.indices for s in slices]
    if len(idx_dtypes) > 1:
        indices = [gradient_ops.cast(i, dtypes.int64) for i in indices]
    values = gradient_ops.concat([s.values for s in slices], 0)
    return IndexedSlices(values, gradient_ops.concat(indices, 0), slices[0].dense_shape)


def _stop_ops(from_ops, stop_gradient_ops, pending):
    stop = set()
    for op in from_ops:
        if all(pending[t.op] <= 0 for t in op.inputs):
            stop.add(op)
    stop.update(stop_gradient_ops)
    return stop


def _to_tensor_list(values, what: str, as_ref=False) -> list:
    out = []
    for v in values:
        if isinstance(v, (ops.Tensor, IndexedSlices)):
            out.append(v)
        elif isinstance(v, ops.Operation):
            raise TypeError(f"{what} must be Tensors, got Operation {v.name}")
        elif as_ref and hasattr(v, "_gradient_source"):  # a variable in xs
            out.append(v._gradient_source())
        else:
            out.append(ops.convert_to_tensor(v, as_ref=as_ref))
    return out


def gradients(
    ys,
    xs,
    grad_ys=None,
    name="gradients",
    colocate_gradients_with_ops=False,
    gate_gradients=False,
    aggregation_method=None,
    stop_gradients=None,
    unconnected_gradients=UnconnectedGradients.NONE,
) -> list:
    """Symbolic partial derivatives of the sum of `ys` with respect to each of `xs`.

    Returns a list as long as `xs`: a Tensor (or IndexedSlices, e.g. for Gather's
    params) per x, or None when ys do not depend on x (or only through integer tensors
    or `stop_gradient`).  `grad_ys` weights each y (default: ones).  `stop_gradients`
    tensors are treated as constants.  Variables in `xs` mean their value.

    Raises:
      LookupError: an op between xs and ys has no registered gradient.
      ValueError: `grad_ys` and `ys` differ in length, or a bad `aggregation_method`
        or `unconnected_gradients`.
      TypeError: a `grad_ys` entry's dtype does not suit its y.
    """
    ys = _to_tensor_list(_as_list(ys), "ys")
    xs = _to_tensor_list(_as_list(xs), "xs", as_ref=True)
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"Length mismatch. Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    if aggregation_method not in (None, 0, 1, 2):
        raise ValueError(f"Invalid aggregation_method specified {aggregation_method}.")
    if unconnected_gradients not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}")
    stop_tensors = _to_tensor_list(_as_list(stop_gradients or []), "stop_gradients")
    graph = ops._graph_from_values(ys + xs)
    with graph.as_default(), graph.name_scope("gradients" if name is None else name):
        out = _gradients_helper(
            ys,
            xs,
            grad_ys,
            stop_tensors,
            colocate_gradients_with_ops,
            gate_gradients,
            aggregation_method,
            UnconnectedGradients.NONE,
        )
    if unconnected_gradients == UnconnectedGradients.ZERO:
        # TF makes these after leaving the gradients scope ("zeros_like", not "gradients/")
        with graph.as_default():
            out = [array_ops.zeros_like(x) if g is None else g for x, g in zip(xs, out)]
    return out


def _in_current_loop(op) -> bool:
    """A loop's Switch reached by gradients built inside that same loop's body."""
    ctx = op._control_flow_context
    return (
        ctx is not None
        and type(ctx).__name__ == "WhileContext"
        and ctx is op.graph._control_flow_context
    )


def _raise_no_grad_wrt_initial_loop_value(op, from_ops) -> None:
    """TF's error for a gradient, inside a while body, through a loop variable's initial
    value: it names the nearest of `xs` reached from the Switch."""
    queue, seen, target = collections.deque([op]), set(), op
    while queue:
        cur = queue.popleft()
        if cur in seen:
            continue
        seen.add(cur)
        if cur in from_ops:
            target = cur
            break
        queue.extend(t.op for t in cur.inputs)
    raise ValueError(
        f"Cannot compute gradient inside while loop with respect to op '{target.name}'. "
        "We do not support taking the gradient wrt or through the initial value of a loop "
        "variable. Gradients can be computed through loop invariants or wrt the input "
        "parameters to the loop body."
    )


def _gradients_helper(ys, xs, grad_ys, stops, colocate, gate, method, unconnected):
    """The one backward walk, for plain and control-flow graphs alike.

    Every op gets the same gradient ops whatever else the graph holds; a while loop
    between xs and ys adds its per-loop state (`control_flow_grad.ControlFlowState`):
    its backward loop, the stacks between the two, and the rule that a loop's backward
    pass starts once all of its exits have their gradients.  A cond needs no state: its
    Switch and Merge have gradients like any other op.
    """
    grad_ys = _default_grad_ys(ys, grad_ys, colocate)
    to_ops = [t.op for t in ys]
    from_ops = [t.op for t in xs]
    reachable_to_ops, between, between_list = _between_ops(to_ops, from_ops)
    # Loop state is created before counting: it adds the loops' exits to `between`.
    loops = control_flow_grad.maybe_create_control_flow_state(between_list, between, colocate)
    pending = _pending_from(between, between_list)
    stop_ops = _stop_ops(from_ops, [t.op for t in stops], pending)
    grads: dict = {}
    for y, gy in zip(ys, grad_ys):
        _set_grad(grads, y, gy)
    queue = collections.deque()
    to_ops_set = set()
    for op in to_ops:
        if pending[op] == 0 and op not in to_ops_set and op in reachable_to_ops:
            to_ops_set.add(op)
            queue.append(op)
    if loops is not None:
        for y in loops.ProcessUnusedLoopExits(pending, to_ops_set):
            if _is_trainable(y):
                _set_grad(grads, y, loops.ZerosLikeForExit(y))
            queue.append(y.op)
    while queue:
        op = queue.popleft()
        with _maybe_colocate(op, colocate):
            gs = loops.EnterGradWhileContext(op, before=True) if loops is not None else None
            try:
                out_grads = _aggregate(grads, op, method)
            finally:
                if gs is not None:
                    gs.grad_context.Exit()
            if op.type == "Switch" and _in_current_loop(op):
                _raise_no_grad_wrt_initial_loop_value(op, set(from_ops))
            in_grads = _op_input_grads(op, out_grads, stop_ops, gate, between, loops)
        for i, (t_in, g) in enumerate(zip(op.inputs, in_grads)):
            if g is None:
                continue
            if isinstance(g, ops.Tensor) and t_in.dtype not in (dtypes.string, dtypes.resource):
                try:
                    g.set_shape(t_in.shape)
                except ValueError:
                    raise ValueError(
                        "Incompatible shapes between op input and calculated input gradient. "
                        f"Forward operation: {op.name}. Input index: {i}. Original input "
                        f"shape: {t_in.shape}. Calculated input gradient shape: {g.shape}"
                    ) from None
            _set_grad(grads, t_in, g)
        _enqueue_ready_inputs(op, grads, queue, pending, loops)
    if loops is not None:
        loops.PostProcessing()
    return [_get_grad(grads, x, unconnected) for x in xs]


def _enqueue_ready_inputs(op, grads, queue, pending, loops) -> None:
    """Count `op` as done for each of its inputs' ops; queue those now ready."""
    for t in op.inputs:
        pending[t.op] -= 1
        ready = pending[t.op] == 0
        if loops is None:
            if ready:
                queue.append(t.op)
            continue
        if not ready:
            # A loop's Switch is processed once per gradient it gets (exit, then body).
            ready = pending[t.op] > 0 and control_flow_grad.is_loop_switch(t.op)
        if not ready:
            continue
        if t.op.type != "Exit":
            queue.append(t.op)
            continue
        for exit_t, needs_zeros in loops.ExitReady(t, lambda o: _has_any_grad(grads, o)):
            if needs_zeros and _is_trainable(exit_t):
                _set_grad(grads, exit_t, loops.ZerosLikeForExit(exit_t))
            queue.append(exit_t.op)


def _has_any_grad(grads: dict, op) -> bool:
    for g in grads.get(op, ()):
        if isinstance(g, (ops.Tensor, IndexedSlices)):
            return True
        if isinstance(g, list) and any(x is not None for x in g):
            return True
    return False


def _op_input_grads(op, out_grads, stop_ops, gate, between, loops) -> list:
    has_out_grads = any(g is not None for g in out_grads)
    grad_fn = None
    if has_out_grads and op not in stop_ops:
        grad_fn = get_gradient_function(op)  # LookupError when none is registered
    if grad_fn is None or not has_out_grads:
        return [None] * len(op.inputs)
    gs = loops.EnterGradWhileContext(op, before=False) if loops is not None else None
    try:
        for i, g in enumerate(out_grads):
            if g is None and _is_trainable(op.outputs[i]):
                # The ys do not depend on this output: its gradient is zero.
                out_grads[i] = control_flow_grad.zeros_like_output(op, i, loops)
        xla_attrs = _xla_grad_attrs(op, op.graph.get_name_scope())
        scope = op.graph._attr_scope(xla_attrs) if xla_attrs else contextlib.nullcontext()
        with ops.name_scope(op.name + "_grad"), scope:
            in_grads = grad_fn(op, *out_grads)
            in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
            if len(in_grads) != len(op.inputs):
                raise ValueError(
                    f"Num gradients {len(in_grads)} generated for op {op.name} do not "
                    f"match num inputs {len(op.inputs)}"
                )
            if gate:
                # Gradients for inputs off every path to xs are never used; gating them
                # with the others would make each step compute them (e.g. d loss / d x
                # for the input placeholder of the first layer: a whole extra matmul).
                in_grads = [g if t.op in between else None for t, g in zip(op.inputs, in_grads)]
                if sum(g is not None for g in in_grads) > 1:
                    in_grads = _gate(op, in_grads)
        return in_grads
    finally:
        if gs is not None:
            gs.grad_context.Exit()


def _xla_grad_attrs(op, grad_scope: str) -> dict:
    """The attrs the gradient ops of `op` get: none unless `op` was built in
    `tf.xla.experimental.jit_scope` (asyncflow/xla.py).  TF compiles a marked op's
    gradient in its forward cluster, or in a cluster of its own
    (`<scope>_grad_<gradients scope>`) when `separate_compiled_gradients` was set."""
    if not op._attrs.get("_XlaCompile"):
        return {}
    scope = op._attrs.get("_XlaScope", b"")
    if isinstance(scope, str):
        scope = scope.encode()
    if op._attrs.get("_XlaSeparateCompiledGradients"):
        scope += b"_grad_" + grad_scope.rstrip("/").replace("/", "_").encode()
    return {"_XlaCompile": True, "_XlaScope": scope}


def _gate(op, in_grads):
    """TF's `control_flow_ops.tuple` over the op's gradients (IndexedSlices included)."""
    graph = op.graph
    with graph.device(None), graph.colocate_with(None, ignore_existing=True):
        return control_flow_ops.tuple(in_grads)


def _set_grad(grads: dict, t, grad) -> None:
    op_grads = grads.setdefault(t.op, [[] for _ in t.op.outputs])
    slot = op_grads[t.value_index]
    if isinstance(slot, list):
        slot.append(grad)
    else:  # the op was already processed (t is also one of ys listed again)
        op_grads[t.value_index] = [slot, grad]


def _get_grad(grads: dict, x, unconnected):
    op_grads = grads.get(x.op)
    g = None
    if op_grads:
        g = op_grads[x.value_index]
        if isinstance(g, list):  # x's op was never processed: aggregate here
            g = _aggregate(grads, x.op, None)[x.value_index]
    if g is None and unconnected == UnconnectedGradients.ZERO:
        return gradient_ops.zeros_like(x)
    return g


def hessians(
    ys,
    xs,
    name="hessians",
    colocate_gradients_with_ops=False,
    gate_gradients=False,
    aggregation_method=None,
):
    """The Hessian of sum(ys) with respect to each x (`tf.hessians`): of shape
    x.shape + x.shape.

    Built as TF builds it: the first gradients, then one while loop per x whose body
    takes the gradient of one element of the flattened first gradient and writes it to
    a TensorArray (so any x size works, known or not).  `name` is unused, as in TF.

    Raises:
      LookupError: an op without a registered gradient.
      ValueError: an x that ys does not reach (its first gradient is None).
    """
    del name  # TF names nothing after it
    xs = _as_list(xs)
    kwargs = {
        "colocate_gradients_with_ops": colocate_gradients_with_ops,
        "gate_gradients": gate_gradients,
        "aggregation_method": aggregation_method,
    }
    out = []
    for g, x in zip(gradients(ys, xs, **kwargs), xs):
        if g is None:  # TF fails in the reshape below
            raise ValueError("None values not supported.")
        flat = array_ops.reshape(g, [-1])
        n = array_ops.size(x)

        def body(j, result, flat=flat, x=x):
            return j + 1, result.write(j, gradients(flat[j], x)[0])

        _, hessian = cfc.while_loop(
            lambda j, _, n=n: j < n,
            body,
            [array_ops.constant(0, dtypes.int32), TensorArray(x.dtype, n)],
        )
        shape = array_ops.shape(x)
        out.append(array_ops.reshape(hessian.stack(), manip_ops.concat((shape, shape), 0)))
    return out


class GradientTape:
    """`tf.compat.v1.GradientTape` in graph mode: `gradient()` adds the ops of
    `gradients()` for what the tape recorded.

    Recorded sources are the tensors passed to `watch`, trainable variables (with
    `watch_accessed_variables`), and tensors whose op was created while the tape was
    open; the gradient with respect to any other source is None (or zeros with
    `UnconnectedGradients.ZERO`), as TF's tape gives for a tensor it never saw.

    Raises (from `gradient`):
      RuntimeError: a non-persistent tape is asked for a second set of gradients.
      ValueError / LookupError: as `gradients`.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = persistent
        self._watch_variables = watch_accessed_variables
        self._watched: list = []
        self._graph = None
        self._start = self._stop = None
        self._used = False

    def __enter__(self) -> GradientTape:
        self._graph = ops.get_default_graph()
        self._start, self._stop = self._graph._id_counter, None
        return self

    def __exit__(self, *exc) -> None:
        self._stop = self._graph._id_counter

    def watch(self, tensor) -> None:
        """Record `tensor` (or every tensor of a nested structure) as a source."""
        for t in nest.flatten(tensor):
            self._watched.append(t)

    def watched_variables(self) -> tuple:
        return tuple(t for t in self._watched if _is_variable(t))

    @contextlib.contextmanager
    def stop_recording(self):
        yield

    def reset(self) -> None:
        self._watched = []
        if self._graph is not None:
            self._start, self._stop = self._graph._id_counter, None

    def _recorded(self, t) -> bool:
        if any(t is w for w in self._watched):
            return True
        if _is_variable(t):
            return self._watch_variables and getattr(t, "trainable", True)
        op = getattr(t, "op", None)
        if op is None or self._start is None:
            return False
        return op._id > self._start and (self._stop is None or op._id <= self._stop)

    def gradient(
        self,
        target,
        sources,
        output_gradients=None,
        unconnected_gradients=UnconnectedGradients.NONE,
    ):
        """d(sum target)/d(source) for each source, in the structure of `sources`."""
        if self._used and not self._persistent:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of "
                "gradients (or jacobians)"
            )
        self._used = True
        flat_sources = nest.flatten(sources)
        flat_targets = nest.flatten(target)
        grad_ys = None if output_gradients is None else nest.flatten(output_gradients)
        grads = gradients(
            flat_targets,
            flat_sources,
            grad_ys=grad_ys,
            unconnected_gradients=unconnected_gradients,
        )
        for i, s in enumerate(flat_sources):
            if not self._recorded(s):
                grads[i] = (
                    array_ops.zeros_like(s)
                    if unconnected_gradients == UnconnectedGradients.ZERO
                    else None
                )
        return nest.pack_sequence_as(sources, grads)


def _is_variable(t) -> bool:
    return hasattr(t, "initializer") and hasattr(t, "assign")
