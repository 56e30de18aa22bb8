"""Connectionist temporal classification (TF1's `tf.nn.ctc_*`): the CTCLoss op with its
gradient, and the greedy and beam-search decoders.

Semantics follow TF's kernels (Graves' thesis, ch. 7, as TF computes it):

- `CTCLoss(inputs [T, B, C] logits, labels as a sparse triple, sequence_length [B])`:
  the blank is class C - 1; per batch entry, its labels in index order, a label >= C - 1
  ending the sequence (a real label after it is an error), repeats collapsed first when
  `preprocess_collapse_repeated`; `ctc_merge_repeated=False` lets no label span two
  frames.  Outputs the loss (-log p(labels | inputs)) and its gradient with respect to
  the logits (softmax minus the labels' posterior), which the op's gradient function
  scales by the loss's incoming gradient.  An entry whose sequence is empty, or whose
  labels are longer than it under `ignore_longer_outputs_than_inputs`, has loss 0 and
  gradient 0; an entry no path can explain has loss inf and gradient softmax.
- `CTCGreedyDecoder`: the best class per frame, blanks dropped (and repeats merged
  with `merge_repeated`); its score is minus the sum of each frame's largest logit.
- `CTCBeamSearchDecoder`: TF's prefix beam search over each frame's log-softmax,
  `beam_width` prefixes kept by total probability, the `top_paths` best returned with
  their log-probabilities.

The forward-backward pass runs for the whole batch at once in float64 (a loop over
time, arrays over batch x label positions); the beam search is a loop per entry.  All
three run as device work (`ctx.compute`), off the event loop.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "ctc_loss",
    "ctc_loss_v2",
    "ctc_greedy_decoder",
    "ctc_beam_search_decoder",
    "ctc_beam_search_decoder_v2",
    "ctc_unique_labels",
]

_T = TypeConstraint(["float32", "float64"], default="float32")
_NEG_INF = float("-inf")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- CTCLoss ---------------------------------------------------------------------------


def _ctc_loss_shape(op):
    inputs = op.inputs[0].shape.with_rank(3)
    op.inputs[1].shape.with_rank(2)
    op.inputs[2].shape.with_rank(1)
    seq = op.inputs[3].shape.with_rank(1)
    batch = inputs[1]
    if not batch.is_compatible_with(seq[0]):
        raise ValueError(f"Dimensions must be equal, but are {batch.value} and {seq[0].value}")
    batch = batch.merge_with(seq[0])
    return [
        tensor_shape.TensorShape([batch]),
        tensor_shape.TensorShape([inputs[0], batch, inputs[2]]),
    ]


CTCLoss = register_op(
    "CTCLoss",
    inputs=[
        "inputs: T",
        "labels_indices: int64",
        "labels_values: int32",
        "sequence_length: int32",
    ],
    outputs=["loss: T", "gradient: T"],
    attrs={
        "preprocess_collapse_repeated": False,
        "ctc_merge_repeated": True,
        "ignore_longer_outputs_than_inputs": False,
        "T": _T,
    },
    shape_fn=_ctc_loss_shape,
)


def _inputs_and_lengths(x, seq_len):
    """TF's checks of the logits [max_time, batch, classes] and sequence_length [batch]
    shared by CTCLoss and the decoders; both as arrays."""
    x, seq_len = np.asarray(x), np.asarray(seq_len)
    if x.ndim != 3:
        raise _invalid("inputs is not a 3-Tensor")
    if seq_len.ndim != 1:
        raise _invalid("sequence_length is not a vector")
    if seq_len.shape[0] != x.shape[1]:
        raise _invalid(
            f"len(sequence_length) != batch_size.  len(sequence_length):  {seq_len.shape[0]} "
            f"batch_size: {x.shape[1]}"
        )
    return x, seq_len


def _join(values) -> str:
    return ",".join(str(int(v)) for v in values)


def _label_rows(indices, values, batch: int) -> list[list[int]]:
    """Each batch entry's labels in index order (TF's SparseTensor group by row)."""
    if indices.shape[0] != values.shape[0]:
        raise _invalid(
            "labels_indices and labels_values must contain the same number of rows, but saw "
            f"shapes: [{indices.shape[0]},{indices.shape[1]}] vs. [{values.shape[0]}]"
        )
    rows: list[list[int]] = [[] for _ in range(batch)]
    if not indices.shape[0]:
        return rows
    order = np.lexsort((indices[:, 1], indices[:, 0]))
    for k in order:
        b = int(indices[k, 0])
        if not 0 <= b < batch:
            raise _invalid(f"labels batch index must be between 0 and {batch} but saw: {b}")
        rows[b].append(int(values[k]))
    return rows


def _targets(rows, num_classes, seq_len, collapse, ignore_longer) -> list[list[int]]:
    """TF's label preprocessing and checks (ctc_loss_calculator's PopulateLPrimes)."""
    targets = []
    for b, label in enumerate(rows):
        if not label:
            raise _invalid(f"Labels length is zero in batch {b}")
        seq: list[int] = []
        finished = False
        for i, v in enumerate(label):
            if i and collapse and v == label[i - 1]:
                continue
            if v >= num_classes - 1:
                finished = True
            elif finished:
                raise _invalid(
                    "Saw a non-null label (index >= num_classes - 1) following a null label, "
                    f"batch: {b} num_classes: {num_classes} labels: {_join(label)} labels "
                    f"seen so far: {_join(seq)}"
                )
            else:
                seq.append(v)
        for v in seq:
            if v < 0:
                raise _invalid(
                    f"All labels must be nonnegative integers, batch: {b} labels: {_join(seq)}"
                )
        if not ignore_longer and len(label) > seq_len[b]:
            raise _invalid(
                f"Not enough time for target transition sequence (required: {len(label)}, "
                f"available: {seq_len[b]}){b}You can turn this error into a warning by using "
                "the flag ignore_longer_outputs_than_inputs"
            )
        targets.append(seq)
    return targets


def _log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _lse3(a, b, c):
    return np.logaddexp(np.logaddexp(a, b), c)


def ctc_loss_and_gradient(x, indices, values, seq_len, collapse, merge, ignore_longer):
    """(loss [B], gradient [T, B, C]) as TF's CTCLoss kernel computes them."""
    indices, values = np.asarray(indices), np.asarray(values)
    if indices.ndim != 2:
        raise _invalid("labels_indices is not a matrix")
    if values.ndim != 1:
        raise _invalid("labels_values is not a vector")
    x, seq_len = _inputs_and_lengths(x, seq_len)
    max_time, batch, num_classes = x.shape
    if batch == 0:
        raise _invalid("batch_size must not be 0")
    rows = _label_rows(indices, values, batch)
    lengths = [int(v) for v in seq_len]
    for b, n in enumerate(lengths):
        if n > max_time:
            raise _invalid(f"sequence_length({b}) <= {max_time}")
    for b, n in enumerate(lengths):
        if n < 0:
            raise _invalid(f"seq_len({b}) < 0")
    targets = _targets(rows, num_classes, lengths, collapse, ignore_longer)

    loss = np.zeros(batch, x.dtype)
    grad = np.zeros(x.shape, x.dtype)
    # Entries CTC cannot score: an empty sequence, labels longer than it (when allowed).
    live = [
        b
        for b in range(batch)
        if lengths[b] > 0 and not (ignore_longer and len(rows[b]) > lengths[b])
    ]
    if not live or num_classes == 0:
        return loss, grad
    blank = num_classes - 1
    n_live = len(live)
    t_len = np.array([lengths[b] for b in live])
    u_len = np.array([2 * len(targets[b]) + 1 for b in live])
    n_u = int(u_len.max())
    lp = np.full((n_live, n_u), blank, np.int64)  # l': blank, l1, blank, l2, ..., blank
    for k, b in enumerate(live):
        lp[k, 1 : 2 * len(targets[b]) : 2] = targets[b]
    u = np.arange(n_u)
    in_seq = u[None, :] < u_len[:, None]
    stay = (lp == blank) | merge
    skip = np.zeros((n_live, n_u), bool)
    skip[:, 2:] = lp[:, 2:] != blank
    if merge:
        skip[:, 2:] &= lp[:, 2:] != lp[:, :-2]
    t_max = int(t_len.max())
    logy = _log_softmax(x[:t_max, live].astype(np.float64))  # [T, B', C]
    emit = np.take_along_axis(logy, np.broadcast_to(lp, (t_max,) + lp.shape), axis=2)

    def band(t):  # TF keeps alpha and beta to the states that can still finish in time
        lo = u_len - 2 * (t_len - t)
        return in_seq & (u[None, :] >= lo[:, None]) & (u[None, :] < 2 * (t + 1))

    neg = np.full((n_live, n_u), _NEG_INF)
    alpha = np.full((t_max, n_live, n_u), _NEG_INF)
    a0 = neg.copy()
    a0[:, 0] = emit[0, :, 0]
    if n_u > 1:
        a0[:, 1] = np.where(u_len > 1, emit[0, :, 1], _NEG_INF)
    alpha[0] = a0
    for t in range(1, t_max):
        prev = alpha[t - 1]
        s1 = np.concatenate([neg[:, :1], prev[:, :-1]], axis=1)
        s2 = np.where(skip, np.concatenate([neg[:, :2], prev[:, :-2]], axis=1), _NEG_INF)
        a = _lse3(np.where(stay, prev, _NEG_INF), s1, s2) + emit[t]
        alpha[t] = np.where(band(t) & (t < t_len)[:, None], a, _NEG_INF)

    beta = np.full((t_max, n_live, n_u), _NEG_INF)
    last = (u[None, :] >= (u_len - 2)[:, None]) & in_seq
    skip_from = np.zeros((n_live, n_u), bool)
    skip_from[:, :-2] = skip[:, 2:]
    for t in range(t_max - 1, -1, -1):
        init = np.where(last, 0.0, _NEG_INF)
        if t + 1 < t_max:
            nxt = beta[t + 1] + emit[t + 1]
            s0 = np.where(stay, nxt, _NEG_INF)
            s1 = np.concatenate([nxt[:, 1:], neg[:, :1]], axis=1)
            s2 = np.where(skip_from, np.concatenate([nxt[:, 2:], neg[:, :2]], axis=1), _NEG_INF)
            rec = np.where(band(t), _lse3(s0, s1, s2), _NEG_INF)
        else:
            rec = neg
        at_end = (t == t_len - 1)[:, None]
        before = (t < t_len - 1)[:, None]
        beta[t] = np.where(at_end, init, np.where(before, rec, _NEG_INF))

    ab = alpha + beta
    with np.errstate(invalid="ignore"):
        log_p = np.logaddexp.reduce(np.where(in_seq, ab[0], _NEG_INF), axis=1)
    y = np.exp(logy)
    for k, b in enumerate(live):
        n = lengths[b]
        if log_p[k] == _NEG_INF:  # no path explains the labels: TF's gradient is y
            loss[b] = np.inf
            grad[:n, b] = y[:n, k]
            continue
        loss[b] = -log_p[k]
        post = np.exp(ab[:n, k, : u_len[k]] - log_p[k])  # [n, U]: each state's posterior
        occupancy = np.zeros((n, num_classes))
        np.add.at(occupancy, (slice(None), lp[k, : u_len[k]]), post)
        grad[:n, b] = y[:n, k] - occupancy
    return loss, grad


@CTCLoss.kernel("CPU")
async def _ctc_loss_kernel(ctx, inputs, labels_indices, labels_values, sequence_length):
    a = ctx.attrs
    return await ctx.compute(
        ctc_loss_and_gradient,
        inputs,
        labels_indices,
        labels_values,
        sequence_length,
        a["preprocess_collapse_repeated"],
        a["ctc_merge_repeated"],
        a["ignore_longer_outputs_than_inputs"],
    )


@CTCLoss.gradient
def _ctc_loss_grad(op, grad_loss, _grad_gradient=None):
    from asyncflow.ops import array_ops, gradient_ops

    # The kernel's gradient output has no gradient of its own (TF's message).
    gradient = gradient_ops.prevent_gradient(
        op.outputs[1],
        message="Currently there is no way to take the second derivative of ctc_loss due "
        "to the fused implementation's interaction with tf.gradients()",
    )
    return [array_ops.expand_dims(grad_loss, -1) * gradient, None, None, None]


# -- decoders --------------------------------------------------------------------------


def _decoder_inputs(x, seq_len):
    x, seq_len = _inputs_and_lengths(x, seq_len)
    max_time = x.shape[0]
    for b, n in enumerate(seq_len):
        if n > max_time:
            raise errors.FailedPreconditionError(None, None, f"sequence_length({b}) <= {max_time}")
    return x, [int(n) for n in seq_len]


def _sparse_paths(paths: list[list[int]], batch: int):
    """One path per batch entry -> (indices [n, 2], values [n], dense_shape [2]), int64."""
    idx = [(b, i) for b, p in enumerate(paths) for i in range(len(p))]
    vals = [v for p in paths for v in p]
    width = max((len(p) for p in paths), default=0)
    return (
        np.array(idx, np.int64).reshape(-1, 2),
        np.array(vals, np.int64),
        np.array([batch, width], np.int64),
    )


def _decoded_shapes(n_paths: int):
    out = [tensor_shape.TensorShape([None, 2])] * n_paths
    out += [tensor_shape.TensorShape([None])] * n_paths
    out += [tensor_shape.TensorShape([2])] * n_paths
    return out


def _greedy_shape(op):
    inputs = op.inputs[0].shape.with_rank(3)
    seq = op.inputs[1].shape.with_rank(1)
    batch = inputs[1].merge_with(seq[0])
    return _decoded_shapes(1) + [tensor_shape.TensorShape([batch, 1])]


CTCGreedyDecoder = register_op(
    "CTCGreedyDecoder",
    inputs=["inputs: T", "sequence_length: int32"],
    outputs=[
        "decoded_indices: int64",
        "decoded_values: int64",
        "decoded_shape: int64",
        "log_probability: T",
    ],
    attrs={"merge_repeated": False, "blank_index": -1, "T": _T},
    shape_fn=_greedy_shape,
)
NotDifferentiable("CTCGreedyDecoder")


def greedy_decode(x, seq_len, merge_repeated: bool, blank_index: int):
    x, lengths = _decoder_inputs(x, seq_len)
    max_time, batch, num_classes = x.shape
    blank = blank_index + num_classes if blank_index < 0 else blank_index
    best = x.argmax(axis=2) if num_classes else np.zeros((max_time, batch), np.int64)
    top = x.max(axis=2) if num_classes else np.zeros((max_time, batch), x.dtype)
    log_prob = np.zeros((batch, 1), x.dtype)
    paths = []
    for b in range(batch):
        n = lengths[b]
        # TF adds each frame's -max in the input's dtype, one after another (cumsum's order)
        log_prob[b, 0] = np.cumsum(-top[:n, b], dtype=x.dtype)[-1] if n > 0 else 0.0
        path, prev = [], -1
        for c in best[:n, b].tolist():
            if c != blank and not (merge_repeated and c == prev):
                path.append(c)
            prev = c
        paths.append(path)
    return (*_sparse_paths(paths, batch), log_prob)


@CTCGreedyDecoder.kernel("CPU")
async def _greedy_kernel(ctx, inputs, sequence_length):
    a = ctx.attrs
    return await ctx.compute(
        greedy_decode, inputs, sequence_length, a["merge_repeated"], a["blank_index"]
    )


def _beam_shape(op):
    inputs = op.inputs[0].shape.with_rank(3)
    seq = op.inputs[1].shape.with_rank(1)
    batch = inputs[1].merge_with(seq[0])
    n = op._attr("top_paths")
    return _decoded_shapes(n) + [tensor_shape.TensorShape([batch, n])]


CTCBeamSearchDecoder = register_op(
    "CTCBeamSearchDecoder",
    inputs=["inputs: T", "sequence_length: int32"],
    outputs=[
        "decoded_indices: top_paths * int64",
        "decoded_values: top_paths * int64",
        "decoded_shape: top_paths * int64",
        "log_probability: T",
    ],
    attrs={"beam_width": REQUIRED, "top_paths": REQUIRED, "merge_repeated": True, "T": _T},
    shape_fn=_beam_shape,
)
NotDifferentiable("CTCBeamSearchDecoder")


class _Entry:
    """A prefix in the beam: its last label, parent, children by label, and the
    probabilities (log) of ending in a blank / in its label / either, at the previous
    frame (old_*) and the current one (new_*).  Inactive while new_total is -inf."""

    __slots__ = (
        "parent",
        "label",
        "children",
        "old_blank",
        "old_label",
        "old_total",
        "new_blank",
        "new_label",
        "new_total",
    )

    def __init__(self, parent, label):
        self.parent, self.label, self.children = parent, label, {}
        self.old_blank = self.old_label = self.old_total = _NEG_INF
        self.new_blank = self.new_label = self.new_total = _NEG_INF

    def reset_new(self):
        self.new_blank = self.new_label = self.new_total = _NEG_INF

    def child(self, label):
        c = self.children.get(label)
        if c is None:
            c = self.children[label] = _Entry(self, label)
        return c

    def labels(self, merge_repeated: bool) -> list[int]:
        out, prev, e = [], -1, self
        while e.parent is not None:
            if not merge_repeated or e.label != prev:
                out.append(e.label)
            prev = e.label
            e = e.parent
        out.reverse()
        return out


def _new_total(e: _Entry) -> float:
    return e.new_total


def _lse(a: float, b: float) -> float:
    if a == _NEG_INF:
        return b
    if b == _NEG_INF:
        return a
    return float(np.logaddexp(a, b))


def _beam_one(frames, beam_width: int, top_paths: int, merge_repeated: bool):
    """TF's CTC beam search (default scorer, no label selection) over one entry's
    frames [n, C]: the `top_paths` best (label sequence, log-probability)."""
    num_classes = frames.shape[1] if frames.ndim == 2 else 0
    blank = num_classes - 1
    root = _Entry(None, -1)
    root.new_total = root.new_blank = 0.0
    leaves = [root]
    for row in frames:
        row = row.tolist()
        # The beam's entries, best first (their current probabilities become the old).
        branches = sorted(leaves, key=lambda e: e.new_total, reverse=True)
        for e in branches:
            e.old_blank, e.old_label, e.old_total = e.new_blank, e.new_label, e.new_total
        leaves = []
        for e in branches:
            p = e.parent
            if p is not None:
                if p.new_total != _NEG_INF:  # its parent is active: it can extend it
                    prev = p.old_blank if e.label == p.label else p.old_total
                    e.new_label = _lse(e.new_label, prev)
                e.new_label += row[e.label]
            e.new_blank = e.old_total + row[blank]
            e.new_total = _lse(e.new_blank, e.new_label)
            leaves.append(e)

        def bottom(leaves=leaves):
            return min(leaves, key=_new_total)

        for e in branches:
            if not (
                e.old_total > _NEG_INF
                and (len(leaves) < beam_width or e.old_total > bottom().new_total)
            ):
                continue
            for label in range(num_classes - 1):
                c = e.child(label)
                if c.new_total != _NEG_INF:
                    continue
                c.new_blank = _NEG_INF
                prev = e.old_blank if label == e.label else e.old_total
                c.new_label = row[label] + prev
                c.new_total = c.new_label
                if c.new_total > _NEG_INF and (
                    len(leaves) < beam_width or c.new_total > bottom().new_total
                ):
                    if len(leaves) == beam_width:
                        low = bottom()
                        low.reset_new()
                        leaves.remove(low)
                    leaves.append(c)
                else:
                    c.old_blank = c.old_label = c.old_total = _NEG_INF
                    c.reset_new()
    if top_paths > beam_width:
        raise _invalid("requested more paths than the beam width.")
    if top_paths > len(leaves):
        raise _invalid("Less leaves in the beam search than requested.")
    best = sorted(leaves, key=lambda e: e.new_total, reverse=True)[:top_paths]
    return [e.labels(merge_repeated) for e in best], [e.new_total for e in best]


def beam_decode(x, seq_len, beam_width: int, top_paths: int, merge_repeated: bool):
    x, lengths = _decoder_inputs(x, seq_len)
    batch = x.shape[1]
    log_prob = np.zeros((batch, top_paths), x.dtype)
    per_path: list[list[list[int]]] = [[] for _ in range(top_paths)]
    for b in range(batch):
        frames = _log_softmax(x[: lengths[b], b].astype(np.float64))
        paths, scores = _beam_one(frames, beam_width, top_paths, merge_repeated)
        for i in range(top_paths):
            per_path[i].append(paths[i])
            log_prob[b, i] = scores[i]
    sparse = [_sparse_paths(p, batch) for p in per_path]
    return (
        *[s[0] for s in sparse],
        *[s[1] for s in sparse],
        *[s[2] for s in sparse],
        log_prob,
    )


@CTCBeamSearchDecoder.kernel("CPU")
async def _beam_kernel(ctx, inputs, sequence_length):
    a = ctx.attrs
    return await ctx.compute(
        beam_decode, inputs, sequence_length, a["beam_width"], a["top_paths"], a["merge_repeated"]
    )


# -- the TF1 functions -----------------------------------------------------------------


def _time_major(x, time_major: bool):
    from asyncflow.ops import array_ops

    return x if time_major else array_ops.transpose(x, [1, 0, 2])


def ctc_loss(
    labels,
    inputs=None,
    sequence_length=None,
    preprocess_collapse_repeated=False,
    ctc_merge_repeated=True,
    ignore_longer_outputs_than_inputs=False,
    time_major=True,
    logits=None,
):
    """TF1's `tf.nn.ctc_loss`: the negative log-probability of each entry's `labels` (an
    int32 SparseTensor) given `inputs` (logits [max_time, batch, num_classes], or batch
    major with `time_major=False`), the blank being class num_classes - 1."""
    if inputs is None:
        inputs = logits
    elif logits is not None:
        raise ValueError("Cannot specify both 'inputs' and 'logits'")
    if not isinstance(labels, SparseTensor):
        raise TypeError("Expected labels (first argument) to be a SparseTensor")
    with ops.name_scope(None, "CTCLoss"):
        inputs = ops.convert_to_tensor(inputs, name="inputs")
        inputs = _time_major(inputs, time_major)
        op = ops.apply_op(
            "CTCLoss",
            [inputs, labels.indices, labels.values, sequence_length],
            {
                "preprocess_collapse_repeated": bool(preprocess_collapse_repeated),
                "ctc_merge_repeated": bool(ctc_merge_repeated),
                "ignore_longer_outputs_than_inputs": bool(ignore_longer_outputs_than_inputs),
            },
        )
    return op.outputs[0]


def _sparse_outputs(op, n_paths: int):
    outs = op.outputs
    return [
        SparseTensor(outs[i], outs[n_paths + i], outs[2 * n_paths + i]) for i in range(n_paths)
    ]


def ctc_greedy_decoder(inputs, sequence_length, merge_repeated=True, blank_index=None):
    """TF1's `tf.nn.ctc_greedy_decoder`: ([SparseTensor of the best path], the negative
    sum of each frame's largest logit [batch, 1])."""
    if blank_index is None:
        blank_index = -1
    op = ops.apply_op(
        "CTCGreedyDecoder",
        [inputs, sequence_length],
        {"merge_repeated": bool(merge_repeated), "blank_index": int(blank_index)},
    )
    return _sparse_outputs(op, 1), op.outputs[3]


def ctc_beam_search_decoder(
    inputs, sequence_length, beam_width=100, top_paths=1, merge_repeated=True
):
    """TF1's `tf.nn.ctc_beam_search_decoder`: (a list of `top_paths` SparseTensors, the
    paths' log-probabilities [batch, top_paths])."""
    op = ops.apply_op(
        "CTCBeamSearchDecoder",
        [inputs, sequence_length],
        {
            "beam_width": int(beam_width),
            "top_paths": int(top_paths),
            "merge_repeated": bool(merge_repeated),
        },
    )
    return _sparse_outputs(op, int(top_paths)), op.outputs[3 * int(top_paths)]


def ctc_beam_search_decoder_v2(inputs, sequence_length, beam_width=100, top_paths=1):
    """TF2's form, which never merges repeated labels in the output paths."""
    return ctc_beam_search_decoder(
        inputs, sequence_length, beam_width=beam_width, top_paths=top_paths, merge_repeated=False
    )


def ctc_unique_labels(labels, name=None):
    """TF's `tf.nn.ctc_unique_labels`: for dense labels [batch, max_len], each row's
    distinct labels in order of first appearance, zero padded (int64), and each label's
    index among them (int32)."""
    from asyncflow.ops import cast_ops, functional_ops, manip_ops, unique_ops

    with ops.name_scope(name, "ctc_unique_labels", [labels]):
        labels = ops.convert_to_tensor(labels, name="labels")

        def unique_row(x):
            y, idx = unique_ops.unique(x)
            y = manip_ops.pad(y, [[0, _dim(idx, 0) - _dim(y, 0)]])
            return [cast_ops.cast(y, dtypes.int64), idx]

        return tuple(functional_ops.map_fn(unique_row, labels, dtype=[dtypes.int64, dtypes.int32]))


def _dim(t, i):
    from asyncflow.ops import array_ops

    v = t.shape[i].value
    return v if v is not None else array_ops.shape(t)[i]


def ctc_loss_v2(
    labels,
    logits,
    label_length,
    logit_length,
    logits_time_major=True,
    unique=None,
    blank_index=None,
    name=None,
):
    """TF's `ctc_loss_v2`: the CTC loss of SparseTensor labels (`blank_index` required),
    or of dense labels [batch, max_label_len] with `label_length` (blank 0 by default),
    with the blank moved to the last class for CTCLoss (negative `blank_index` counts
    from the end).  `unique` (TF's optimisation for dense labels) changes no result and
    is not used."""
    from asyncflow.ops import array_ops, cast_ops, math_ops, scatter_nd_ops, sequence_ops

    del unique
    with ops.name_scope(name, "ctc_loss", [logits]):
        logits = ops.convert_to_tensor(logits, name="logits")
        logits = _time_major(logits, logits_time_major)
        num_classes = logits.shape[2].value
        if isinstance(labels, SparseTensor):
            if blank_index is None:
                raise ValueError(
                    "Argument `blank_index` must be provided when labels is a SparseTensor."
                )
        else:
            labels = ops.convert_to_tensor(labels, name="labels")
            if blank_index is None:
                blank_index = 0
            mask = sequence_ops.sequence_mask(label_length, maxlen=array_ops.shape(labels)[1])
            where = array_ops.where(mask)
            values = cast_ops.cast(scatter_nd_ops.gather_nd(labels, where), dtypes.int32)
            labels = SparseTensor(
                where, values, cast_ops.cast(array_ops.shape(labels), dtypes.int64)
            )
        if blank_index < 0:
            if num_classes is None:
                raise ValueError("a negative blank_index needs logits of known class count")
            blank_index += num_classes
        if num_classes is None or blank_index != num_classes - 1:
            # The classes rotated so that the blank is last; the labels above it move down.
            logits = array_ops.concat(
                [
                    logits[:, :, :blank_index],
                    logits[:, :, blank_index + 1 :],
                    logits[:, :, blank_index : blank_index + 1],
                ],
                axis=2,
            )
            values = labels.values
            values = array_ops.where(math_ops.less(values, blank_index), values, values - 1)
            labels = SparseTensor(labels.indices, values, labels.dense_shape)
        return ctc_loss(labels, logits, logit_length, time_major=True)
