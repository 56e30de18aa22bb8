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

lint: setup
	$(BIN)/ruff check asyncflow ops devices tests benchmarks examples

bench: setup
	$(BIN)/python benchmarks/run.py

# Regenerate asyncflow/protos/*_pb2.py(i) from the .proto files (committed; the runtime
# needs only `protobuf`).  grpcio-tools bundles protoc; its protobuf major version must
# match the `protobuf` pin in pyproject.toml.
protos: $(BIN)/python
	$(BIN)/pip install -q 'grpcio-tools>=1.85' 'protobuf>=7.35.1,<8'
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. asyncflow/protos/*.proto

.PHONY: setup example quickstart test lint bench protos
