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

# Two pytest workers, one per core of the 2-core CI machine (the tests are independent;
# each has a timeout), then the stand-in GPU set.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE):
# without it every process compiles its modules again, and pytest rewrites the asserts of
# ~500 test modules again in every worker (~30 s of CPU each), the stand-in GPU set's
# workers and every test's subprocess included.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -p no:cacheprovider

# Before the workers start, tests/warm_up.py does once, on both cores, what each worker
# would otherwise do at the same time on a fresh clone while it collects: the test modules'
# rewritten asserts, the modules' bytecode and the CNN loops' numba cache (~25 s a worker).
# The stand-in GPU set runs from here without `setup` again (pip's editable install, ~10 s).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python tests/warm_up.py
	$(PYTEST) -n 2
	$(FAKE_GPU_RUN)

# The op, training and example tests again with a stand-in GPU (devices/fake_cupy.py),
# where TF1 placement puts everything with a GPU kernel on GPU:0.  Tests of CPU
# internals pin their graph to the CPU; tests of variables' buffers look them up on the
# device that holds them.  GPU_DESELECT is for tests that cannot run on a GPU device
# (none now).
GPU_TESTS := tests/ops tests/test_gpu_device.py tests/test_rnn.py tests/test_optimizers.py \
	tests/test_optimizers_tf.py tests/test_layers.py tests/test_layer_classes.py \
	tests/test_losses.py tests/test_nn_composites.py tests/test_gradients.py \
	tests/test_cond.py tests/test_while_loop.py tests/test_examples_fake_gpu.py \
	tests/test_cudnn_rnn_ops.py
GPU_DESELECT :=

# Two pytest-xdist workers: the set is ~5,300 tests of CPU work, and the two cores run it in
# half the time (CI's 15 minutes: ~290 s serial, ~150 s on two).  The examples' test is
# left out here: the main suite runs it already, on the stand-in where no GPU is found.
FAKE_GPU_RUN = ASYNCFLOW_FAKE_GPUS=1 $(PYTEST) -q -n 2 \
	$(filter-out tests/test_examples_fake_gpu.py,$(GPU_TESTS)) $(GPU_DESELECT)

test-fake-gpu: setup
	$(FAKE_GPU_RUN)

# The same tests on a real GPU (CuPy and a CUDA driver present; no stand-in), and the
# GPU check's table (benchmarks/gpu_check.py).
test-gpu: $(BIN)/python
	$(BIN)/pip install -q -e '.[test,gpu]'
	$(BIN)/python -m pytest -p no:cacheprovider -q $(GPU_TESTS) $(GPU_DESELECT)
	$(BIN)/python benchmarks/gpu_check.py

print-gpu-tests:
	@echo $(GPU_TESTS) $(GPU_DESELECT)

lint: setup
	$(BIN)/ruff check asyncflow ops devices tests benchmarks examples tools

bench: setup
	$(BIN)/python benchmarks/run.py

# The model training steps of benchmarks/models beside TF 2.21 (issue 21; TF from
# $$ASYNCFLOW_TF_PYTHON or /work/tfvenv, with tf-keras for the LSTMs).
bench-models: setup
	$(BIN)/python benchmarks/models/run_models.py

# Regenerate asyncflow/protos/*_pb2.py(i), TF Serving's API in asyncflow/protos/serving/
# included (committed; the runtime needs only `protobuf`).  grpcio-tools bundles protoc; its protobuf major version must
# match the `protobuf` pin in pyproject.toml.
protos: $(BIN)/python
	$(BIN)/pip install -q 'grpcio-tools>=1.85' 'protobuf>=7.35.1,<8'
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. asyncflow/protos/*.proto \
		asyncflow/protos/serving/*.proto

.PHONY: setup example quickstart test test-fake-gpu test-gpu print-gpu-tests lint bench bench-models protos
