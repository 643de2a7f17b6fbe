# Two commands on a fresh machine: `make demo` and `make test`. Each builds .venv by itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast durations checks lint-imports typecheck deadcode docs lint bench clean venv

$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	# the exact CPU torch lives only in constraints-cpu.txt: pip takes the local CPU wheel; a
	# loose requirement would pull a CUDA build. pyproject.toml has lower bounds only.
	$(PY) -m pip install --quiet -c constraints-cpu.txt torch
	$(PY) -m pip install --quiet -c constraints-cpu.txt -e ".[dev,docs,server,nvml,lightning,hf,ray,fleet]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/wattcap demo --out demo-output

# the layer contracts, the type checker and the dead-code check run before the tests, in both
# test targets
lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# dead code: vulture over the library, the tests, benchmarks and examples as its users
deadcode: $(STAMP)
	$(VENV)/bin/vulture

# the documentation site, built offline; --strict makes a broken link, a missing page or a
# docstring the API reference cannot read fail the build (the site goes to site/)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 PYTHONWARNINGS=ignore::DeprecationWarning $(VENV)/bin/mkdocs build --strict --quiet

checks: lint-imports typecheck deadcode docs

# The tests run in two processes (pytest-xdist), one per core of the 2-core machines `make test`
# is timed on (the goal: 6 minutes from a fresh clone; docs/results.md has the measured time); a
# test file stays in one process (its module fixtures are built once). `make test PYTEST_WORKERS=0` runs them in this process, `=auto` one per core.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: checks
	$(PY) -m pytest $(PYTEST_PARALLEL)

# the edit-test loop: everything but the tests marked slow
test-fast: checks
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not slow"

# the slowest tests and the time of each: where `make test`'s minutes go
durations: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL) --durations=25 --durations-min=2

lint: $(STAMP)
	$(VENV)/bin/ruff check wattcap tests bench

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) demo-output .pytest_cache site
