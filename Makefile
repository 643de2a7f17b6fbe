# Two commands on a fresh machine: `make demo` and `make test`. Each builds .venv by itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS := .[dev,docs,server,nvml,lightning,hf,ray,fleet]

# Python writes the bytecode of what it imports, once, into __pycache__ (the .venv's and the
# tree's, which git ignores): where the environment asks it not to (PYTHONDONTWRITEBYTECODE),
# every process of the tests would compile its imports again (pytest took 7:29 instead of 5:30)
export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test test-fast durations checks lint-imports typecheck deadcode docs lint bench clean venv

# where pip finds local wheels (here: the CPU build of torch) for uv, which reads no pip setting
FIND_LINKS = $(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))

$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	# the exact CPU torch lives only in constraints-cpu.txt and comes from the local wheel pip
	# knows of (a loose requirement would pull a CUDA build); pyproject.toml has lower bounds
	# only. uv installs it and everything else in one go: its parallel downloads and unpacking
	# take about 15 s where pip takes about 2 minutes (the same versions here); pip where uv
	# cannot be had or fails (uv reads no pip setting but the local wheels given here). uv
	# compiles no bytecode: Python writes it for what is imported, once (see the export above).
	$(PY) -m pip install --quiet uv && $(PY) -m uv pip install --quiet \
		--python $(PY) $(foreach links,$(FIND_LINKS),--find-links $(links)) \
		-c constraints-cpu.txt torch -e "$(EXTRAS)" \
		|| { echo "uv failed or is not to be had: installing with pip (about 2 minutes)"; \
		     $(PY) -m pip install --quiet -c constraints-cpu.txt torch \
		     && $(PY) -m pip install --quiet -c constraints-cpu.txt -e "$(EXTRAS)"; }
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/wattcap demo --out demo-output

# the layer contracts, the type checker, the dead-code check and the docs build: in both test
# targets they run beside the tests (see pytest_beside_checks)
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

# The checks (the layer contracts, dead code, the docs build and mypy, the slowest: about 40 s
# on one core from a clean clone's empty cache) run one after another in the background while
# the tests run, their output held and shown after the tests'; the target fails if either fails
# (an interrupted run stops the checks too). They run at the lowest priority (nice): on the
# cores' idle moments while test processes wait on the processes they started (Ray, Flower,
# the CLI), not in the tests' place; what is left when the tests end runs at full speed then.
TEST_CHECKS := lint-imports deadcode docs typecheck
define pytest_beside_checks
	@nice -n 19 $(MAKE) --no-print-directory -k $(TEST_CHECKS) > $(VENV)/checks.log 2>&1 & checks=$$!; \
	trap 'kill $$checks 2>/dev/null' INT TERM; \
	echo '$(PY) -m pytest $(PYTEST_PARALLEL) $(1)  (and beside it: $(TEST_CHECKS))'; \
	$(PY) -m pytest $(PYTEST_PARALLEL) $(1); tests=$$?; \
	wait $$checks; checked=$$?; cat $(VENV)/checks.log; \
	test $$tests -eq 0 && test $$checked -eq 0
endef

test: $(STAMP)
	$(call pytest_beside_checks,)

# the edit-test loop: everything but the tests marked slow
test-fast: $(STAMP)
	$(call pytest_beside_checks,-m "not slow")

# the slowest tests and the time of each: where `make test`'s minutes go
durations: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL) --durations=25 --durations-min=2

lint: $(STAMP)
	$(VENV)/bin/ruff check wattcap tests bench

# the benches that read another's folder run after it, on bench-output/decision-quality;
# readme_demo_table.py writes a demo's table into the results page: a tool, not a bench
BENCH_OUT ?= bench-output
BENCH_AFTER_DQ := bench/decision_quality.py bench/transfer_robustness.py bench/trace_quality.py
BENCH_ALONE := $(filter-out $(BENCH_AFTER_DQ) bench/readme_demo_table.py,$(wildcard bench/*.py))

bench: $(STAMP)
	for b in $(BENCH_ALONE); do echo "== $$b"; $(PY) $$b || exit 1; done
	mkdir -p $(BENCH_OUT)
	$(PY) bench/decision_quality.py --out $(BENCH_OUT)/decision-quality
	$(PY) bench/transfer_robustness.py $(BENCH_OUT)/decision-quality
	$(PY) bench/trace_quality.py --runs $(BENCH_OUT)/decision-quality

clean:
	rm -rf $(VENV) demo-output $(BENCH_OUT) .pytest_cache site
