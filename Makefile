# Two entry points, both usable on a fresh machine with only Python installed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

example: $(BIN)/python
	$(BIN)/pip install -q -e '.[examples]'
	$(BIN)/python examples/train_digits.py

quickstart: setup
	$(BIN)/python examples/quickstart.py

test: setup
	$(BIN)/python -m pytest -p no:cacheprovider
	$(MAKE) test-fake-gpu

# The op and training tests again with a stand-in GPU (devices/fake_cupy.py), where TF1
# placement puts everything with a GPU kernel on GPU:0.  Deselected: tests of CPU
# internals (buffer identity, CPU-side memos, alloc checks) and two that count loop
# turns until a step parks (a GPU copy waits on a stream thread's callback instead).
GPU_TESTS := tests/ops tests/test_gpu_device.py tests/test_rnn.py tests/test_optimizers.py \
	tests/test_optimizers_tf.py tests/test_layers.py tests/test_layer_classes.py \
	tests/test_losses.py tests/test_nn_composites.py tests/test_gradients.py \
	tests/test_cond.py tests/test_while_loop.py
GPU_DESELECT := \
	--deselect tests/ops/test_array_ops.py::test_check_alloc_called \
	--deselect tests/ops/test_conv_fast_paths.py::test_spectra_memo_within_a_step \
	--deselect tests/ops/test_state_ops.py::test_updates_are_in_place_without_outside_holders \
	--deselect tests/ops/test_state_ops.py::test_update_after_fetch_copies_once_then_in_place \
	--deselect tests/ops/test_barrier_ops.py::test_take_waits_until_enough_elements_are_complete \
	--deselect tests/ops/test_queue_ops.py::test_close_waits_behind_pending_enqueues \
	--deselect tests/test_optimizers.py::test_update_is_in_place_and_fetched_values_never_change

test-fake-gpu: setup
	ASYNCFLOW_FAKE_GPUS=1 $(BIN)/python -m pytest -p no:cacheprovider -q $(GPU_TESTS) $(GPU_DESELECT)

# The same tests on a real GPU (CuPy and a CUDA driver present; no stand-in), and the
# GPU check's table (benchmarks/gpu_check.py).
test-gpu: $(BIN)/python
	$(BIN)/pip install -q -e '.[test,gpu]'
	$(BIN)/python -m pytest -p no:cacheprovider -q $(GPU_TESTS) $(GPU_DESELECT)
	$(BIN)/python benchmarks/gpu_check.py

print-gpu-tests:
	@echo $(GPU_TESTS) $(GPU_DESELECT)

lint: setup
	$(BIN)/ruff check asyncflow ops devices tests benchmarks examples

bench: setup
	$(BIN)/python benchmarks/run.py

# Regenerate asyncflow/protos/*_pb2.py(i), TF Serving's API in asyncflow/protos/serving/
# included (committed; the runtime needs only `protobuf`).  grpcio-tools bundles protoc; its protobuf major version must
# match the `protobuf` pin in pyproject.toml.
protos: $(BIN)/python
	$(BIN)/pip install -q 'grpcio-tools>=1.85' 'protobuf>=7.35.1,<8'
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. asyncflow/protos/*.proto \
		asyncflow/protos/serving/*.proto

.PHONY: setup example quickstart test test-fake-gpu test-gpu print-gpu-tests lint bench protos
