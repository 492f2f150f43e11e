# Two commands matter: `make sweep` (set up, then run the default study) and
# `make test` (set up, then run the tests). Setup is idempotent: it reinstalls
# only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export GLOG_v := 3

.PHONY: setup sweep test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

sweep: setup
	$(PY) -m autotune sweep $(ARGS)

test: setup
	$(PY) -m pytest $(ARGS)

bench: setup
	$(PY) -m bench.run_all $(ARGS)

clean:
	rm -rf runs .pytest_cache
