# Two commands matter: `make sweep` (set up, then run the default study) and
# `make test` (set up, then run the tests). Setup is idempotent: it reinstalls
# only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export GLOG_v := 3

.PHONY: setup sweep test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

sweep: setup
	$(PY) -m autotune sweep $(ARGS)

test: setup
	$(PY) -m pytest $(ARGS)

lint: setup
	$(VENV)/bin/ruff check autotune trials tests bench
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) -m bench.trial_overhead
	$(PY) -m bench.trial_repeatability
	$(PY) -m bench.trial_rank_correlation
	$(PY) -m bench.sweep_costs
	$(PY) -m bench.trial_time_split
	$(PY) -m bench.false_gains
	$(PY) -m bench.search_efficiency --jobs 2
	$(PY) -m bench.profiler_overhead
	$(PY) -m bench.profile_share
	$(PY) -m autotune commbench
	$(PY) -m bench.parallel_utilisation --ks 8 4 1

clean:
	rm -rf runs .pytest_cache
