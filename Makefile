# memlane: `make run` serves over stdio on the embedded database; `make test` installs and tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
INSPECTOR_VERSION := 2.12.0
# The memlane[torch] extra (embedding.provider "local") lives in its own venv, so the default one
# stays what a user's `pip install memlane` is: no torch. `make test-torch` tests that provider.
TORCH_VENV ?= .venv-torch
# Where pip looks for torch. Empty: the configured package index. On Linux, plain PyPI torch brings
# GBs of CUDA libraries; `make install-torch TORCH_INDEX=https://download.pytorch.org/whl/cpu` takes
# the CPU build instead (see the README).
TORCH_INDEX ?=

.PHONY: install install-torch run setup test test-fast test-torch lint bench clean browser screenshots docs docs-generate dist bundle

# What `make run` needs and no more: memlane and what `pip install memlane` brings (editable, so
# the checkout's code is what runs). -qq: pip's errors still show, but not the editable install's
# notice from setuptools or a warning per package about an index location, which buried the
# server's first line under a few screens.
PIP := $(BIN)/pip install -qq
$(BIN)/memlane: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $@

# The checks' tools (pytest, ruff, mypy, mkdocs, cog, build, selenium...), added to the same venv by
# the targets that use them, so `make test` after `make run` reuses it. `make install` is this.
DEV := $(VENV)/.dev-extras
$(DEV): $(BIN)/memlane
	$(PIP) -e '.[test,docs]'
	touch $@

$(TORCH_VENV)/bin/memlane: pyproject.toml
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install --quiet --upgrade pip
	# torch first and pinned, so the rest of the install keeps the build chosen here.
	$(TORCH_VENV)/bin/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(TORCH_VENV)/bin/pip install --quiet -e '.[torch,test]'
	touch $@

node_modules/.bin/mcp-inspector: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

install: $(DEV)

install-torch: $(TORCH_VENV)/bin/memlane

run: $(BIN)/memlane
	@$(BIN)/memlane serve

# `make setup CLIENT=cursor`: point a client at this checkout's memlane (what the banner of
# `make run` says, without typing the venv's path).
CLIENT ?= claude-desktop
setup: $(BIN)/memlane
	$(BIN)/memlane setup $(CLIENT)

# The memory browser's real-browser tests drive Debian's Chromium. Installed here when missing and
# we can (root with apt-get); otherwise those tests skip and say why, and make test goes on.
browser:
	@if [ ! -x /usr/bin/chromedriver ] && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing chromium and chromium-driver for the browser tests"; \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver) \
			|| echo "could not install chromium: the browser tests will be skipped"; \
	fi

test: $(DEV) node_modules/.bin/mcp-inspector browser
	$(BIN)/python -m pytest -q

# The inner loop: the tests not marked slow, in this process against the session's embedded
# PostgreSQL. None starts memlane, Node, a browser, a package build or a PostgreSQL server of its
# own, so neither Node nor Chromium is installed for it. PYTEST_ARGS narrows it further, e.g.
# `make test-fast PYTEST_ARGS=tests/pipeline/recall`. CI runs `make test`, which runs them all.
PYTEST_ARGS ?=
test-fast: $(DEV)
	$(BIN)/python -m pytest -q -m "not slow and not torch" $(PYTEST_ARGS)

# The tests marked torch (the sentence-transformers provider, and MiniLM on torch against ONNX),
# in the venv that has the extra; in `make test` they are skipped, each saying so.
test-torch: $(TORCH_VENV)/bin/memlane
	$(TORCH_VENV)/bin/python -m pytest -q -m torch

# PNGs of every page of the memory browser over a demo store, for docs/browser.md.
screenshots: $(DEV) browser
	$(BIN)/python -m memlane.bench.screenshots --output bench/results/ui

# mypy reads the package through links named as it is imported (pyproject.toml [tool.mypy]).
MYPY_TREE := build/mypy/memlane

lint: $(DEV)
	$(BIN)/ruff check server pipeline prompts bench tests
	$(BIN)/ruff format --check server pipeline prompts bench tests
	$(BIN)/lint-imports
	@mkdir -p $(MYPY_TREE) && for part in pipeline server prompts bench; do ln -sfn ../../../$$part $(MYPY_TREE)/$$part; done
	$(BIN)/mypy -p memlane.pipeline -p memlane.server -p memlane.bench -p memlane.prompts

# Pages that restate the code (the configuration reference and config.example.toml, the results
# tables rendered from bench/results/*.json) are written by the cog blocks in them. `make docs` fails
# when one is stale (cog --check), a page names a path that does not exist, the code names a docs
# page or heading that does not exist (.ci/check_doc_paths.py), or a link is broken (mkdocs --strict);
# `make docs-generate` rewrites the generated parts.
DOC_SOURCES := README.md $(wildcard docs/*.md) config.example.toml

docs: $(DEV)
	$(BIN)/cog --check $(DOC_SOURCES)
	$(BIN)/python .ci/check_doc_paths.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-generate: $(DEV)
	$(BIN)/cog -r $(DOC_SOURCES)

# The sdist and the wheel (built from the sdist) that `pipx install` and `uvx --from` take; the
# tests in tests/packaging build and install their own copies.
dist: $(DEV)
	rm -f dist/memlane-*.whl dist/memlane-*.tar.gz
	$(BIN)/python -m build --quiet --outdir dist .

bench: $(DEV)
	$(BIN)/memlane bench all --output bench/results

# The MCP bundle for Claude Desktop (docs/packaging.md): what `uv run` needs to build and run memlane
# from source, staged in build/bundle (bundle/stage.py), validated and packed by the pinned mcpb CLI.
BUNDLE_STAGE := build/bundle

bundle: node_modules/.bin/mcp-inspector
	$(PYTHON) bundle/stage.py $(BUNDLE_STAGE)
	node_modules/.bin/mcpb validate $(BUNDLE_STAGE)/manifest.json
	@mkdir -p dist
	node_modules/.bin/mcpb pack $(BUNDLE_STAGE) dist/memlane.mcpb

clean:
	rm -rf $(VENV) $(TORCH_VENV) node_modules build dist site *.egg-info
