# `make demo` and `make test` set everything up on a fresh machine (Python 3.11+).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PACKAGES := todoflow dsl compiler runtime grammars
TYPECHECK := build/typecheck

.PHONY: setup demo test test-fast lint typecheck pytest bench bench-check screenshots fuzz clean node-tools editors editor-screenshot

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'pip>=25.1'  # 25.1: `--group` (PEP 735)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]' --group dev
	touch $(STAMP)

setup: $(STAMP)
	bash .ci/setup-chromium
	bash .ci/setup-mermaid
	bash .ci/setup-graphviz
	bash .ci/setup-postgres
	bash .ci/setup-shells

demo: setup
	$(BIN)/todoflow check examples/*.todoflow
	$(BIN)/todoflow fmt --check examples/*.todoflow
	@echo "--- a broken workflow, to show the diagnostics (todoflow check exits 1: it found errors):"
	@$(BIN)/todoflow check tests/fixtures/invalid/unclosed-and-misspelt.todoflow; test $$? -eq 1
	@echo "--- compile, then run the release example with a scripted agent:"
	rm -rf build/demo && mkdir -p build/demo/workspace
	$(BIN)/todoflow compile examples/release.todoflow -o build/demo/release
	$(BIN)/todoflow run examples/release.todoflow --agent scripted:examples/replies/release.yaml \
		--run-dir build/demo/runs --workspace build/demo/workspace
	@echo "--- an orchestrated step: delegations, a failed prevalidation and its retry, the generic agent:"
	$(BIN)/todoflow run examples/orchestrated.todoflow --agent scripted:examples/replies/orchestrated.yaml \
		--run-dir build/demo/runs --workspace build/demo/workspace --learnings build/demo/learnings
	$(BIN)/todoflow log $$(ls -t build/demo/runs | head -1) --run-dir build/demo/runs
	$(BIN)/todoflow learnings list --learnings build/demo/learnings
	@echo "--- learn_code: the step's main.py delegates each export, with no orchestrator model:"
	cp -r examples/learnings/. build/demo/learnings/
	$(BIN)/todoflow run examples/fast-path.todoflow --agent scripted:examples/replies/fast-path.yaml \
		--run-dir build/demo/runs --workspace build/demo/workspace --learnings build/demo/learnings
	$(BIN)/todoflow status --run-dir build/demo/runs

test: setup lint typecheck pytest editors

lint: setup
	$(BIN)/ruff check $(PACKAGES) tests bench editors
	$(BIN)/ruff format --check $(PACKAGES) tests bench editors
	$(BIN)/vulture $(PACKAGES) tests bench --exclude "tests/fixtures,node_modules" --min-confidence 60 \
		--ignore-decorators "@_settles,@_derives,@_describes,@_asks"  # handlers found in tables keyed by entry kind

# The packages live in top-level folders mapped into `todoflow.*` by setuptools;
# mypy reads them through a tree of links laid out as the installed package.
typecheck: setup
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/todoflow
	for f in todoflow/*; do ln -s "$$PWD/$$f" $(TYPECHECK)/todoflow/; done
	ln -s "$$PWD/dsl" $(TYPECHECK)/todoflow/dsl
	ln -s "$$PWD/compiler" $(TYPECHECK)/todoflow/compiler
	ln -s "$$PWD/runtime" $(TYPECHECK)/todoflow/runtime
	ln -s "$$PWD/grammars" $(TYPECHECK)/todoflow/grammars
	cd $(TYPECHECK) && "$$OLDPWD/$(BIN)/mypy" --config-file "$$OLDPWD/pyproject.toml" -p todoflow

# Every test, the slow ones too, spread over one pytest worker per core (pytest-xdist;
# each worker starts its own PostgreSQL cluster). PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= auto

pytest: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

# The quick inner loop: every test but those marked `slow` (crash, scale, PostgreSQL,
# browser, LSP and MCP subprocesses, fuzz): it needs neither Chromium nor PostgreSQL.
test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow" -n $(PYTEST_WORKERS) --dist worksteal

# Benchmarks run as modules of the `bench` package from the repo root (scratch: build/bench/):
# every figure against its peer or floor in the same run (docs/performance.md); the peers
# (LangGraph) come from the `bench` dependency group. `make bench-check` (not part of
# `make test`: run it on a quiet machine) fails when a ratio misses its target beyond
# its noise band.
BENCH_STAMP := $(VENV)/.bench-stamp

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --group bench
	touch $(BENCH_STAMP)

bench: setup $(BENCH_STAMP)
	$(BIN)/python -m bench

bench-check: setup $(BENCH_STAMP)
	$(BIN)/python -m bench --check

# the pictures in docs/images: the release example's plan canvas, run card and run report, drawn by Chromium
screenshots: setup
	$(BIN)/python -m tests.support.screenshots docs/images

# Editor support: the TextMate grammar against its annotated samples, and the VS Code
# extension packaged (into build/, never published). The npm tools live in build/node/.
NPX := npx --prefix=$(CURDIR)/build/node --no

node-tools:
	.ci/setup-node-tools

editors: node-tools
	cd editors/vscode && node --check extension.js && $(NPX) vscode-tmgrammar-test 'tests/*.todoflow'
	cd editors/vscode && $(NPX) vsce package --skip-license --allow-missing-repository \
		--out $(CURDIR)/build/todoflow-vscode.vsix

# The picture in docs/editors.md: highlighting and a diagnostic, in headless Chromium.
editor-screenshot: setup
	.ci/setup-chromium
	$(BIN)/python editors/screenshot.py editors/screenshot.png

# The fuzzer of tests/compiler/test_fuzz.py, long: mutated sources and plans (a few seconds in `make test`).
fuzz: setup
	TODOFLOW_FUZZ_EXAMPLES=40000 $(BIN)/pytest -q tests/compiler/test_fuzz.py

.PHONY: postgres postgres-stop

# A PostgreSQL server of your own for the store (docs/postgres.md): a cluster in
# build/postgres on a free loopback port; prints the URL. `make postgres-stop` stops it.
postgres: setup
	$(BIN)/python -m tests.support.postgres start build/postgres

postgres-stop: setup
	$(BIN)/python -m tests.support.postgres stop build/postgres

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
