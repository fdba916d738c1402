# memlane: `make run` serves over stdio on the embedded database; `make test` installs and tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
INSPECTOR_VERSION := 2.12.0

.PHONY: install run test lint bench clean

$(BIN)/memlane: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned: pip then takes the CPU build on disk instead of GBs of CUDA wheels.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

node_modules/.bin/mcp-inspector: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

install: $(BIN)/memlane

run: $(BIN)/memlane
	@$(BIN)/memlane serve

test: $(BIN)/memlane node_modules/.bin/mcp-inspector
	$(BIN)/python -m pytest -q

lint: $(BIN)/memlane
	$(BIN)/ruff check server pipeline prompts tests
	$(BIN)/ruff format --check server pipeline prompts tests

bench: $(BIN)/memlane
	$(BIN)/memlane bench all --output bench/results

clean:
	rm -rf $(VENV) node_modules build *.egg-info
