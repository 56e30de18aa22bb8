"""`tf.lite.Interpreter`: runs a .tflite flatbuffer's first subgraph with NumPy kernels.

The model is parsed once (`schema.read_model`, bounds-checked); constant tensors keep
their buffer's bytes as read-only arrays. `allocate_tensors` gives every input a zeroed
array and, after `resize_tensor_input`, re-derives the other tensors' shapes by running
the operators once on those zeros (the kernels are the shape functions). `invoke` walks
the operators in file order, as TFLite does.

Invariant: no array is allocated from a size the file states until that size has been
checked against `_MAX_TENSOR_BYTES` (a hostile file cannot make us allocate terabytes).
"""

from __future__ import annotations

import os

import numpy as np

from asyncflow.lite import kernels, quant_kernels, schema

_MAX_TENSOR_BYTES = 1 << 31
_CUSTOM = 32  # BuiltinOperator CUSTOM: the op is named by its custom_code
_MAX_MODEL_BYTES = 1 << 31


def _quant_details(tensor: dict) -> tuple[tuple, dict]:
    q = tensor.get("quantization") or {}
    scales = np.asarray(q.get("scale") if q.get("scale") is not None else [], np.float32)
    zeros = np.asarray(q.get("zero_point") if q.get("zero_point") is not None else [], np.int32)
    simple = (float(scales[0]), int(zeros[0])) if len(scales) == 1 and len(zeros) else (0.0, 0)
    params = {
        "scales": scales,
        "zero_points": zeros,
        "quantized_dimension": int(q.get("quantized_dimension") or 0),
        "block_size": 0,
    }
    return simple, params


def _checked_shape(shape, what: str) -> tuple[int, ...]:
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims) or len(dims) > 16:
        raise ValueError(f"Invalid shape {list(dims)} for {what}")
    count = 1
    for d in dims:
        count *= d
    if count * 8 > _MAX_TENSOR_BYTES:
        raise ValueError(f"Tensor {what} of shape {list(dims)} is too large")
    return dims


class _UnsupportedOp(Exception):
    """A valid model using a builtin operator this interpreter has no kernel for."""


class Interpreter:
    """Runs a TFLite model (float32, float16-weight, dynamic-range or full-integer) in NumPy.

    Raises:
      ValueError: neither or both of `model_path` and `model_content`, an unreadable
        file, or a buffer that is not a valid TFLite flatbuffer.
    """

    def __init__(
        self,
        model_path=None,
        model_content=None,
        experimental_delegates=None,
        num_threads=None,
        experimental_op_resolver_type=None,
        experimental_preserve_all_tensors=False,
        experimental_disable_delegate_clustering=False,
        experimental_default_delegate_latest_features=False,
    ):
        # (the two delegate switches: this interpreter runs no delegates)
        del experimental_disable_delegate_clustering, experimental_default_delegate_latest_features
        if model_path is None and model_content is None:
            raise ValueError("`model_path` or `model_content` must be specified.")
        if model_path is not None and model_content is not None:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < -1):
            raise ValueError(
                "num_threads should >= 1 or just -1 to let TFLite runtime set the value."
            )
        if model_path is not None:
            path = os.fspath(model_path)
            try:
                with open(path, "rb") as f:
                    model_content = f.read(_MAX_MODEL_BYTES + 1)
            except OSError as exc:
                raise ValueError(f"Could not open '{path}'.") from exc
        if len(model_content) > _MAX_MODEL_BYTES:
            raise ValueError("The model is not a valid Flatbuffer buffer")
        self._content = bytes(model_content)
        try:
            self._model = schema.read_model(self._content)
            self._setup()
        except _UnsupportedOp as exc:
            raise ValueError(str(exc)) from None
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ValueError("The model is not a valid Flatbuffer buffer") from exc
        self._allocated = False
        self._dirty = False

    # -- model structure

    def _setup(self) -> None:
        model = self._model
        if not model.get("subgraphs"):
            raise ValueError("no subgraph")
        sg = model["subgraphs"][0]
        self._tensors = sg.get("tensors") or []
        buffers = model.get("buffers") or []
        n = len(self._tensors)
        self._inputs = [int(i) for i in sg.get("inputs", [])]
        self._outputs = [int(i) for i in sg.get("outputs", [])]
        codes = model.get("operator_codes") or []
        self._ops = []
        for op in sg.get("operators") or []:
            code = codes[op["opcode_index"]]
            builtin = max(code["builtin_code"], code["deprecated_builtin_code"])
            name = schema.BUILTIN_NAMES.get(builtin)
            if builtin == _CUSTOM and code.get("custom_code") == "NumericVerify":
                name = "NumericVerify"  # the quantization debugger's op
            elif name is None or (
                name not in kernels.KERNELS and name not in quant_kernels.INT_KERNELS
            ):
                raise _UnsupportedOp(
                    f"Didn't find op for builtin opcode '{name or builtin}' version "
                    f"'{code['version']}': asyncflow's interpreter has no kernel for it"
                )
            ins = [int(i) for i in op.get("inputs", [])]
            outs = [int(i) for i in op.get("outputs", [])]
            if any(i >= n or i < -1 for i in ins) or any(i >= n or i < 0 for i in outs):
                raise ValueError("operator tensor index out of range")
            self._ops.append((name, ins, outs, op.get("builtin_options") or {}))
        self._shapes: list[tuple[int, ...]] = []
        self._dtypes: list[np.dtype] = []
        self._consts: dict[int, np.ndarray] = {}
        self._quant = [quant_kernels.quant_of(t) for t in self._tensors]
        for i, t in enumerate(self._tensors):
            if t["type"] not in schema.TENSOR_NUMPY:
                raise ValueError(f"unsupported tensor type {t['type']}")
            dtype = np.dtype(schema.TENSOR_NUMPY[t["type"]])
            shape = _checked_shape(t["shape"] if t["shape"] is not None else [], str(i))
            self._shapes.append(shape)
            self._dtypes.append(dtype)
            data = buffers[t["buffer"]].get("data") if t["buffer"] < len(buffers) else None
            if data is not None and len(data):
                count = int(np.prod(shape, dtype=np.int64))
                if len(data) != count * dtype.itemsize:
                    raise ValueError(f"buffer size does not match tensor {i}")
                arr = np.frombuffer(data.tobytes(), dtype.newbyteorder("<"), count)
                arr = arr.astype(dtype).reshape(shape)
                arr.flags.writeable = False
                self._consts[i] = arr
        for name, _, outs, _ in self._ops:
            if name == "NumericVerify":
                # TFLite's kernel makes its output float32 (the differences), whatever
                # type the file gives it.
                self._dtypes[outs[0]] = np.dtype(np.float32)
        for i in self._inputs + self._outputs:
            if not 0 <= i < n:
                raise ValueError("subgraph input/output index out of range")
        self._signatures = {}
        for sig in model.get("signature_defs") or []:
            self._signatures[sig["signature_key"]] = {
                "inputs": {m["name"]: int(m["tensor_index"]) for m in sig["inputs"] or []},
                "outputs": {m["name"]: int(m["tensor_index"]) for m in sig["outputs"] or []},
            }

    def _check_index(self, index: int) -> int:
        n = len(self._tensors)
        if not isinstance(index, int | np.integer) or not 0 <= index < n:
            raise ValueError(f"Invalid tensor index {index} exceeds max tensor index {n}")
        return int(index)

    # -- details

    def _tensor_details(self, index: int, name: str | None = None) -> dict:
        t = self._tensors[index]
        simple, params = _quant_details(t)
        sig = t.get("shape_signature")
        shape = np.array(self._shapes[index], np.int32)
        return {
            "name": t.get("name") or "" if name is None else name,
            "index": index,
            "shape": shape,
            "shape_signature": np.array(sig, np.int32) if sig is not None else shape.copy(),
            "dtype": self._dtypes[index].type,
            "quantization": simple,
            "quantization_parameters": params,
            "sparsity_parameters": {},
        }

    def get_input_details(self) -> list[dict]:
        return [self._tensor_details(i) for i in self._inputs]

    def get_output_details(self) -> list[dict]:
        return [self._tensor_details(i) for i in self._outputs]

    def get_tensor_details(self) -> list[dict]:
        return [self._tensor_details(i) for i in range(len(self._tensors))]

    # -- tensors

    def allocate_tensors(self) -> None:
        """Gives each non-constant tensor an array of its (possibly resized) shape."""
        self._values: dict[int, np.ndarray] = {}
        for i in self._inputs:
            if i not in self._consts:
                self._values[i] = np.zeros(self._shapes[i], self._dtypes[i])
        if self._dirty:
            with np.errstate(all="ignore"):
                self._run()
            for i, v in list(self._values.items()):
                self._shapes[i] = v.shape
        for i in range(len(self._tensors)):
            if i not in self._consts and i not in self._values:
                self._values[i] = np.zeros(self._shapes[i], self._dtypes[i])
        self._allocated = True
        self._dirty = False

    def resize_tensor_input(self, input_index, tensor_size, strict=False) -> None:
        """Sets input `input_index`'s shape; call `allocate_tensors` before `invoke`.

        Raises:
          ValueError: a bad index or shape; with `strict`, changing a dimension that the
            shape signature does not mark -1.
        """
        index = self._check_index(input_index)
        shape = _checked_shape(np.asarray(tensor_size).reshape(-1), f"input {index}")
        if strict:
            sig = self._tensor_details(index)["shape_signature"]
            for d, (new, old) in enumerate(zip(shape, sig, strict=False)):
                if old != -1 and new != old:
                    raise ValueError(
                        f"Attempting to resize dimension {d} of tensor {index} with value "
                        f"{old} to {new}. "
                        "ResizeInputTensorStrict only allows mutating unknown dimensions "
                        "identified by -1."
                    )
        if shape != self._shapes[index]:
            self._shapes[index] = shape
            self._dirty = True
        self._allocated = False

    def set_tensor(self, tensor_index, value) -> None:
        """Copies `value` into tensor `tensor_index`.

        Raises:
          ValueError: a bad index, unallocated tensors, or a dtype or shape that differs
            from the tensor's.
        """
        index = self._check_index(tensor_index)
        if not self._allocated:
            raise ValueError(
                "Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first"
            )
        value = np.asarray(value)
        want = self._dtypes[index]
        if value.dtype != want:
            raise ValueError(
                f"Cannot set tensor: Got value of type {_type_name(value.dtype)} but expected "
                f"type {_type_name(want)} for input {index}, name: "
                f"{self._tensors[index].get('name') or ''} "
            )
        shape = self._shapes[index]
        if value.ndim != len(shape):
            raise ValueError(
                f"Cannot set tensor: Dimension mismatch. Got {value.ndim} but expected "
                f"{len(shape)} for input {index}."
            )
        for d, (got, exp) in enumerate(zip(value.shape, shape, strict=True)):
            if got != exp:
                raise ValueError(
                    f"Cannot set tensor: Dimension mismatch. Got {got} but expected "
                    f"{exp} for dimension {d} of input {index}."
                )
        self._values[index] = value.copy()

    def get_tensor(self, tensor_index, subgraph_index=0) -> np.ndarray:
        """A copy of tensor `tensor_index`'s value.

        Raises:
          ValueError: a bad index, or a non-constant tensor before `allocate_tensors`.
        """
        index = self._check_index(tensor_index)
        if index in self._consts:
            return self._consts[index].copy()
        if not self._allocated:
            raise ValueError("Tensor data is null. Run allocate_tensors() first")
        return self._values[index].copy()

    def tensor(self, tensor_index):
        """A function returning tensor `tensor_index`'s current array (not a copy)."""
        index = self._check_index(tensor_index)
        return lambda: self._consts.get(index, self._values.get(index))

    # -- running

    def _run(self) -> None:
        values = self._values
        for name, ins, outs, opts in self._ops:
            args = []
            for i in ins:
                if i == -1:
                    args.append(None)
                elif i in self._consts:
                    args.append(self._consts[i])
                elif i in values:
                    args.append(values[i])
                else:
                    raise RuntimeError("Invoke called on model that is not ready.")
            specs = [(self._shapes[o], self._dtypes[o]) for o in outs]
            try:
                results = None
                if name == "DEQUANTIZE":
                    quant = self._tensors[ins[0]].get("quantization") or {}
                    results = [kernels.dequantize(args[0], quant)]
                elif name == "NumericVerify":
                    # The dequantized value less the float reference.
                    quant = self._tensors[ins[0]].get("quantization") or {}
                    results = [kernels.dequantize(args[0], quant) - args[1]]
                elif any(q is not None for q in self._quant_of(ins + outs)):
                    results = quant_kernels.run(
                        name, args, opts, specs, self._quant_of(ins), self._quant_of(outs)
                    )
                if results is None:
                    results = kernels.KERNELS[name](args, opts, specs)
            except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as exc:
                raise RuntimeError(f"{name} failed to run: {exc}") from exc
            except MemoryError as exc:
                raise RuntimeError(f"{name} ran out of memory: {exc}") from exc
            for o, r in zip(outs, results, strict=True):
                values[o] = np.asarray(r, self._dtypes[o])

    def _quant_of(self, indices) -> list:
        return [None if i == -1 else self._quant[i] for i in indices]

    def invoke(self) -> None:
        """Runs the model on the inputs set.

        Raises:
          RuntimeError: before `allocate_tensors`, or an operator's inputs are invalid.
        """
        if not self._allocated:
            raise RuntimeError("Invoke called on model that is not ready.")
        self._run()

    def reset_all_variables(self) -> None:
        """Float models here hold no variables; kept for API parity."""

    # -- signatures

    def get_signature_list(self) -> dict:
        return {
            key: {"inputs": list(sig["inputs"]), "outputs": list(sig["outputs"])}
            for key, sig in self._signatures.items()
        }

    def get_signature_runner(self, signature_key=None) -> SignatureRunner:
        """A callable running signature `signature_key` (the only one when None).

        Raises:
          ValueError: `signature_key` is None with other than one signature, or unknown.
        """
        if signature_key is None:
            if len(self._signatures) != 1:
                raise ValueError(
                    f"SignatureDef signature_key is None and model has {len(self._signatures)} "
                    "Signatures. None is only allowed when the model has 1 SignatureDef"
                )
            signature_key = next(iter(self._signatures))
        if signature_key not in self._signatures:
            raise ValueError(f'Invalid signature_key provided: "{signature_key}".')
        return SignatureRunner(self, self._signatures[signature_key])


def _type_name(dtype) -> str:
    code = schema.NUMPY_TENSOR.get(np.dtype(dtype))
    return schema.TENSOR_TYPE_NAMES.get(code, str(dtype).upper())


class SignatureRunner:
    """Runs one signature: `runner(**inputs)` returns {output name: array}."""

    def __init__(self, interpreter: Interpreter, signature: dict):
        self._interp = interpreter
        self._sig = signature

    def get_input_details(self) -> dict:
        return {k: self._interp._tensor_details(i, k) for k, i in self._sig["inputs"].items()}

    def get_output_details(self) -> dict:
        return {k: self._interp._tensor_details(i, k) for k, i in self._sig["outputs"].items()}

    def __call__(self, **kwargs) -> dict:
        """Raises ValueError on a missing or unknown input name."""
        names = self._sig["inputs"]
        if len(kwargs) != len(names):
            raise ValueError(
                "Invalid number of inputs provided for running a SignatureDef, "
                f"expected {len(names)} vs provided {len(kwargs)}"
            )
        interp = self._interp
        for key, value in kwargs.items():
            if key not in names:
                raise ValueError(f"Invalid Input name ({key}) for SignatureDef")
            value = np.asarray(value)
            if tuple(value.shape) != tuple(interp._shapes[names[key]]):
                interp.resize_tensor_input(names[key], value.shape)
        if not interp._allocated:
            interp.allocate_tensors()
        for key, value in kwargs.items():
            interp.set_tensor(names[key], np.asarray(value))
        interp.invoke()
        return {k: interp.get_tensor(i) for k, i in self._sig["outputs"].items()}
