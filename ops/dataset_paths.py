"""TF's words for where in a pipeline a dataset function failed: the iterator path
("Iterator::Root::Prefetch::FlatMap[2]::Map") of TF 2.21's "Error in user-defined
function passed to ... transformation with iterator: <path>: <cause>", computed from a
pass's stages as TF's graph rewrites would leave them.  Words only: nothing here
changes what runs (dataset_pipeline.in_function words the error).

The rules, as TF 2.21 shows them (tests/fixtures/dataset_fn_error_words_cases.py):
- A stage is named by its op type less "Dataset" (MapDataset: Map, ParallelMapDatasetV2:
  ParallelMapV2, BatchDatasetV2: BatchV2); Shuffle is Shuffle whatever its version, a
  take, skip or repeat is named by its count (FiniteTake, FiniteSkip, FiniteRepeat,
  ForeverRepeat) and an in-memory cache is MemoryCacheImpl; an options dataset has no
  iterator of its own.
- An input iterator is indexed where a stage has several: Zip[i] and Concatenate[i] by
  input, FlatMap[k] and ParallelInterleaveV4[k] by the input element that made the
  inner dataset, Interleave[s] by its cycle slot, FiniteRepeat[e] by the epoch.
- TF's default rewrites, each off where the pipeline's options turn it off
  (apply_default_optimizations false turns them all off):
  noop_elimination: take(-1), skip(0), repeat(1), shard(1, 0) and a map whose
  function is the identity vanish (grappler simplifies x + 0 and x * 1 to x first);
  shuffle_and_repeat_fusion: a repeat of a shuffle is one ShuffleAndRepeat;
  map_and_batch_fusion: a batch of a map is one MapAndBatch (Batch decides, as it
  runs it);
  map_parallelization (with autotune on): a MapDataset whose function has no stateful
  op (Assert aside) is a ParallelMapV2 -- in the pipeline, not in the datasets its
  functions make;
  inject_prefetch (with autotune on): a Prefetch at the top, unless the top stage is
  asynchronous (a parallel map or interleave, MapAndBatch, ParallelBatch, Prefetch).
  The datasets a function makes (flat_map's, interleave's) take the eliminations and
  fusions, not the last two.  A user's prefetch(0) stays; deterministic changes no name.
- The iterator prefix is the same for a one-shot and an initializable iterator; the
  "<op type>:<n>" part counts the datasets TF's process made, which even from a fresh
  process is not stable where an inner dataset's iterator runs ahead (not ours to match).

Stages are read by their attributes (`input`, `fn`, `count`, ...) and by the op that
made them (`_built_by`, ops/dataset_ops.py), so this module imports no stage class;
a stage it does not know leaves the path unnamed (None) and the caller words the
failing stage alone.
"""

from __future__ import annotations

import numpy as np

from asyncflow import proto_wire

__all__ = ["iterator_path", "stage_path"]

# Op types whose TF iterator name is not the op type less "Dataset"
_NAMED = {
    "ShuffleDataset": "Shuffle",
    "ShuffleDatasetV2": "Shuffle",
    "ShuffleDatasetV3": "Shuffle",
    "ShuffleAndRepeatDatasetV2": "ShuffleAndRepeat",
}
# Stages that add no iterator of their own to TF's path
_TRANSPARENT = frozenset({"OptionsDataset"})
_MAPS = frozenset({"MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2"})
_BATCHES = frozenset({"BatchDataset", "BatchDatasetV2"})
_INNER_DATASETS = frozenset(
    {
        "FlatMapDataset",
        "InterleaveDataset",
        "ParallelInterleaveDataset",
        "ParallelInterleaveDatasetV2",
        "ParallelInterleaveDatasetV3",
        "ParallelInterleaveDatasetV4",
    }
)
# Top stages over which inject_prefetch adds no Prefetch (they run ahead already)
_ASYNC = frozenset(
    {
        "ParallelMap",
        "ParallelMapV2",
        "MapAndBatch",
        "ParallelBatch",
        "Prefetch",
        "ParallelInterleave",
        "ParallelInterleaveV2",
        "ParallelInterleaveV3",
        "ParallelInterleaveV4",
    }
)
# Ops grappler folds away inside a function when one operand is the constant below
_NEUTRAL = {"AddV2": 0, "Add": 0, "Sub": 0, "Mul": 1}

# OptimizationOptions (Options field 3) fields of the default rewrites; autotune is
# Options field 7 (AutotuneOptions.enabled, field 1)
_REWRITES = {
    9: "map_and_batch_fusion",
    12: "map_parallelization",
    14: "noop_elimination",
    17: "shuffle_and_repeat_fusion",
    19: "inject_prefetch",
}


def iterator_path(env, target, fn, exc) -> str | None:
    """TF's iterator path ("Iterator::Root::...") of the pass `env` runs (its root:
    `env.root`, its words above it `env.root_head`: Env.name_from) down to the stage
    `target`, whose function `fn` raised `exc`; None where the pass has no root or a
    stage on the way is one these rules do not know."""
    root = getattr(env, "root", None)
    if root is None:
        return None
    if env.root_rewrites == "none":
        rewrites = dict.fromkeys(_REWRITES.values(), False)
    else:
        rewrites = _rewrites(_options_of(root))
    try:
        names = _Walk(env, target, _failed_part(fn, exc), rewrites).down(root, True)
    except (AttributeError, TypeError, RecursionError):
        names = None  # (a stage unlike those these rules read; a thousand stages deep)
    if not names:
        return None
    top = env.root_rewrites == "top"
    if top and rewrites["inject_prefetch"] and names[0].partition("[")[0] not in _ASYNC:
        names = ["Prefetch", *names]
    return "::".join([env.root_head, *names])


def stage_path(env, stage) -> str | None:
    """TF's iterator path of the pass `env` runs down to `stage` (no function's)."""
    return iterator_path(env, stage, None, None)


def _op_type(v) -> str | None:
    made = getattr(v, "__dict__", {}).get("_built_by")
    return made[0].type if made is not None else None


def _name(op_type: str) -> str:
    return _NAMED.get(op_type) or op_type.replace("Dataset", "", 1)


def _failed_part(fn, exc) -> int:
    """Which of the maps fused into `fn`'s one call (`fn.earlier`, then its own part)
    raised `exc`: its index, the first applied 0."""
    name = getattr(getattr(exc, "op", None), "name", None)
    for j, part in enumerate(getattr(fn, "earlier", ())):
        if name in part:
            return j
    return len(getattr(fn, "earlier", ()))


class _Walk:
    """One search for `target` from a pass's root, naming the stages on the way."""

    def __init__(self, env, target, part: int, rewrites: dict):
        self.env, self.target, self.part, self.rw = env, target, part, rewrites

    def down(self, v, top: bool) -> list[str] | None:
        """The names from `v` down to the target, None where it is not beneath `v`
        (`top`: `v` is in the pipeline itself, not in a dataset a function made)."""
        op = _op_type(v)
        while op in _TRANSPARENT:
            v = v.input
            op = _op_type(v)
        if op in _MAPS or (op is None and type(v).__name__ == "Map"):
            return self._map(v, op, top, skip_last=False)
        if op in _BATCHES or op == "MapAndBatchDataset":
            return self._batch(v, op, top)
        if op in ("RepeatDataset", "TakeDataset", "SkipDataset"):
            return self._counted(v, op, top)
        if op in _INNER_DATASETS:
            return self._with_inner(v, _name(op), top)
        if op in ("ZipDataset", "ConcatenateDataset"):
            inputs = v.inputs if op == "ZipDataset" else (v.first, v.second)
            for i, x in enumerate(inputs):
                rest = self.down(x, top)
                if rest is not None:
                    return [f"{_name(op)}[{i}]", *rest]
            return None
        if op is None:
            return None  # (a stage no op made: these rules do not know it)
        if v is self.target:  # (a filter, say)
            return [_name(op)]
        if not hasattr(v, "input"):
            return None  # (a source, or a stage of several inputs these rules do not know)
        if op == "ShardDataset" and v.n == 1 and self.rw["noop_elimination"]:
            return self.down(v.input, top)  # (shard(1, 0))
        if op.startswith("CacheDataset"):
            if type(v).__name__ != "Cache":
                return None  # (a cache in files: TF's name not recorded)
            return self._above(["MemoryCacheImpl"], v.input, top)
        return self._above([_name(op)], v.input, top)

    def _above(self, names: list, below, top: bool) -> list[str] | None:
        rest = self.down(below, top)
        return None if rest is None else [*names, *rest]

    def _map(self, v, op, top: bool, skip_last: bool) -> list[str] | None:
        """A map stage: the maps Dataset.map fused into its call each one of TF's (the
        last one left out where a MapAndBatch took it: `skip_last`)."""
        names = [self._map_name(v, op, top, j, part) for j, part in enumerate(_parts(v.fn))]
        if skip_last:
            names[-1] = None
        if v is self.target:
            return [n for n in reversed(names[self.part :]) if n]
        rest = self.down(v.input, top)
        return None if rest is None else [n for n in reversed(names) if n] + rest

    def _map_name(self, v, op, top: bool, j: int, part) -> str | None:
        if op != "MapDataset":  # (a map of its own op: ParallelMapDatasetV2's, say)
            return _name(op) if op else "ParallelMapV2" if v.parallel > 1 else "Map"
        stateful, identity = part
        if identity and self.rw["noop_elimination"] and not (v is self.target and j == self.part):
            return None
        if top and self.rw["map_parallelization"] and not stateful:
            return "ParallelMapV2"
        return "Map"

    def _batch(self, v, op, top: bool) -> list[str] | None:
        below = v.input
        fused = op == "MapAndBatchDataset" or v._fused(self.env)
        if not fused:
            return self._above([_name(op)], below, top)
        if not hasattr(below, "fn"):
            return None
        if op == "MapAndBatchDataset":  # (its map is its own: no stage of TF's)
            return self._above(["MapAndBatch"], below.input, top)
        rest = self._map(below, _op_type(below), top, skip_last=True)
        return None if rest is None else ["MapAndBatch", *rest]

    def _counted(self, v, op, top: bool) -> list[str] | None:
        count = v.count
        noop = {"TakeDataset": -1, "SkipDataset": 0, "RepeatDataset": 1}[op]
        if count == noop and self.rw["noop_elimination"]:
            return self.down(v.input, top)
        if op == "TakeDataset":
            return self._above(["FiniteTake"], v.input, top) if count > 0 else None
        if op == "SkipDataset":
            return self._above(["FiniteSkip"], v.input, top) if count > 0 else None
        if count == 0:
            return None
        below = v.input
        while _op_type(below) in _TRANSPARENT:
            below = below.input
        if self.rw["shuffle_and_repeat_fusion"] and _name(_op_type(below) or "") == "Shuffle":
            return self._above(["ShuffleAndRepeat"], below.input, top)
        epoch = self.env.opened.get(v, 0)
        kind = "ForeverRepeat" if count < 0 else "FiniteRepeat"
        return self._above([f"{kind}[{epoch}]"], below, top)

    def _with_inner(self, v, name: str, top: bool) -> list[str] | None:
        """flat_map, interleave: the target in the stage itself, beneath it, or in an
        inner dataset it has open (`env.opened`: slot -> (index, dataset))."""
        if v is self.target:
            return [name]
        rest = self.down(v.input, top)
        if rest is not None:
            return [name, *rest]
        for index, inner in dict(self.env.opened.get(v, {})).values():
            rest = self.down(inner, False)
            if rest is not None:
                return [f"{name}[{index}]", *rest]
        return None


def _parts(fn) -> list[tuple[bool, bool]]:
    """(stateful, identity) of each map fused into `fn`'s one call (`fn.earlier`, then
    its own part), as TF's rewrites judge a map's function; kept on `fn`."""
    hit = fn.__dict__.get("_tf_parts")
    if hit is None:
        body = _body(fn)
        earlier = list(getattr(fn, "earlier", ()))
        rest = [o for o in body if not any(o.name in p for p in earlier)]
        groups = [[o for o in body if o.name in p] for p in earlier] + [rest]
        hit = fn.__dict__["_tf_parts"] = [
            (any(_stateful(o) for o in g), all(_folds_away(o) for o in g)) for g in groups
        ]
        # (an identity passes on what it reads, in order: `fn.reads`, each part's)
        reads = fn.__dict__.get("reads") or (list(fn.inputs),)
        if len(reads) != len(groups):
            if len(fn.outputs) != len(fn.inputs):
                hit[-1] = (hit[-1][0], False)
            return hit
        results = [*reads[1:], list(fn.outputs)]
        for j, (stateful, identity) in enumerate(hit):
            if identity and reads[j] is not None and results[j] is not None:
                hit[j] = (stateful, _passes_on(reads[j], results[j]))
    return hit


def _passes_on(reads: list, results: list) -> bool:
    """Whether `results` are `reads`, in order, through ops that fold away."""
    if len(reads) != len(results):
        return False
    return all(_through(r).name == a.name for a, r in zip(reads, results, strict=True))


def _through(t):
    """`t` back through Identity and x + 0, x - 0, x * 1 (`_folds_away`)."""
    for _ in range(64):  # (a bound: no op chain in a map's function is longer here)
        op = t.op
        if op.type == "Identity" and op.inputs:
            t = op.inputs[0]
            continue
        neutral = _NEUTRAL.get(op.type)
        if neutral is None or not _folds_away(op):
            return t
        rest = [x for x in op.inputs if not _is_scalar_const(x, neutral)]
        if len(rest) != 1:
            return t
        t = rest[0]
    return t


def _body(fn) -> list:
    """The ops of `fn`'s traced body: from its outputs back to its arguments."""
    stops = {t.op.name for t in [*fn.inputs, *fn.captures]}
    stack = [getattr(t, "op", t) for t in fn.outputs]
    seen: dict = {}
    while stack:
        o = stack.pop()
        if o.name in seen or o.name in stops:
            continue
        seen[o.name] = o
        stack.extend(t.op for t in o.inputs)
        stack.extend(o.control_inputs)
    return list(seen.values())


def _stateful(op) -> bool:
    return bool(getattr(op.op_def, "stateful", False)) and op.type != "Assert"


def _folds_away(op) -> bool:
    """Whether `op` is gone from a function once grappler simplified it: an Identity, a
    scalar constant, x + 0, x - 0, x * 1."""
    if op.type in ("Identity", "Const"):
        return op.type == "Identity" or np.ndim(op.attrs.get("value")) == 0
    neutral = _NEUTRAL.get(op.type)
    if neutral is None or len(op.inputs) != 2:
        return False
    ok = [k for k, t in enumerate(op.inputs) if _is_scalar_const(t, neutral)]
    return bool(ok) and (op.type != "Sub" or ok == [1])


def _is_scalar_const(t, of) -> bool:
    value = t.op.attrs.get("value") if t.op.type == "Const" else None
    return value is not None and np.ndim(value) == 0 and value == of


def _options_of(root) -> bytes:
    """The serialized options of the pipeline's outermost options dataset (which holds
    the pipeline's options merged), b"" where it has none."""
    stack, seen = [root], set()
    while stack:
        v = stack.pop(0)
        if id(v) in seen:
            continue
        seen.add(id(v))
        if _op_type(v) == "OptionsDataset":
            return getattr(v, "serialized", b"")
        attrs = getattr(v, "__dict__", {})
        for attr in ("input", "first", "second"):
            x = attrs.get(attr)
            if x is not None and hasattr(x, "iterate"):
                stack.append(x)
        inputs = attrs.get("inputs", ())
        stack.extend(x for x in inputs if hasattr(x, "iterate"))
    return b""


def _rewrites(serialized: bytes) -> dict[str, bool]:
    """Which of TF's default rewrites the serialized Options leave on (all on where
    they do not parse)."""
    set_: dict[int, bool] = {}
    defaults, autotune = True, True
    try:
        for number, wire, value in proto_wire.fields(serialized):
            if wire != 2 or number not in (3, 7):
                continue
            for inner, inner_wire, v in proto_wire.fields(value):
                if inner_wire != 0:
                    continue
                if number == 7 and inner == 1:
                    autotune = bool(v)
                elif number == 3 and inner == 1:
                    defaults = bool(v)
                elif number == 3 and inner in _REWRITES:
                    set_[inner] = bool(v)
    except ValueError:
        set_, defaults, autotune = {}, True, True
    out = {name: set_.get(n, defaults) for n, name in _REWRITES.items()}
    out["map_parallelization"] = out["map_parallelization"] and autotune
    out["inject_prefetch"] = out["inject_prefetch"] and autotune
    return out
