# memlane: `make run` serves over stdio on the embedded database; `make test` installs and tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
INSPECTOR_VERSION := 2.12.0
# Where pip looks for torch. Empty: the configured package index. On Linux, plain PyPI torch brings
# GBs of CUDA libraries; `make install TORCH_INDEX=https://download.pytorch.org/whl/cpu` takes the
# CPU build instead (see the README).
TORCH_INDEX ?=

.PHONY: install run test lint bench clean

$(BIN)/memlane: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned, so the rest of the install keeps the build chosen here.
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
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
