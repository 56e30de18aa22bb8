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

.PHONY: setup example quickstart test lint bench
