# Two commands matter: `make sweep` (set up, then run the default study) and
# `make test` (set up, then run the tests). Setup is idempotent: it reinstalls
# only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export GLOG_v := 3
# Material for MkDocs prints a banner about its successor on every build.
export NO_MKDOCS_2_WARNING := 1

# MindFormers lives in its own environment (its wheel declares MindSpore 2.11 and a package
# that is not on PyPI): `make mindformers-setup` builds .venv-mindformers with the project,
# mindformers==2.1.0 without its declared dependencies, and the pinned ones it really needs.
MF_VENV := .venv-mindformers
MF_PY := $(MF_VENV)/bin/python
MF_STAMP := $(MF_VENV)/.installed
# bench/seam_overhead.py compares HEAD's orchestrator with this revision's (issue 19).
SEAM_OLD ?= 26a4878

.PHONY: setup sweep test lint docs docs-serve reference bench clean mindformers-setup sweep-mindformers test-mindformers

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

sweep: setup
	$(PY) -m autotune sweep $(ARGS)

# Two workers side by side (pytest-xdist; a file's tests stay on one worker, so a module's
# shared real study is built once), then the tests marked solo alone: they compare real
# speeds or measure the host's load, which a test beside them would change. MARK narrows
# both by a marker expression (MARK='not slow': no MindSpore); exit code 5 is "no test
# selected" (ARGS or MARK chose none of one kind).
MARK ?=
ALSO := $(if $(MARK), and ($(MARK)),)
test: setup
	$(PY) -m pytest -n 2 --dist loadfile -m "not solo$(ALSO)" $(ARGS) || [ $$? = 5 ]
	$(PY) -m pytest -m "solo$(ALSO)" $(ARGS) || [ $$? = 5 ]

mindformers-setup: $(MF_STAMP)

$(MF_STAMP): pyproject.toml requirements-mindformers.txt
	test -x $(MF_PY) || $(PYTHON) -m venv $(MF_VENV)
	$(MF_PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@echo "mindformers-setup: pip's 'ERROR: ... mindformers 2.1.0 requires ...' lines below (mindspore~=2.11.0, hyper-parallel, transformers and others) are expected: the wheel declares MindSpore 2.11 and a package not on PyPI; it is installed without them and runs on MindSpore 2.10 (tests/mindformers)"
	$(MF_PY) -m pip install --quiet --disable-pip-version-check --no-deps mindformers==2.1.0
	$(MF_PY) -m pip install --quiet --disable-pip-version-check -r requirements-mindformers.txt
	touch $(MF_STAMP)

sweep-mindformers: mindformers-setup
	$(MF_PY) -m autotune sweep workload=mindformers_llama_tiny $(ARGS)

test-mindformers: mindformers-setup
	$(MF_PY) -m pytest tests/mindformers $(ARGS)

lint: setup
	$(VENV)/bin/ruff check autotune trials tests bench
	$(VENV)/bin/lint-imports

# The documentation site, mkdocs --strict (a broken link or a page missing from the nav fails
# it). The reference pages are generated from the code by `make reference` and committed;
# tests/cli/test_reference.py fails when one is stale.
docs: setup
	$(VENV)/bin/mkdocs build --strict

reference: setup
	$(PY) -m autotune.reference docs/reference

docs-serve: docs
	$(VENV)/bin/mkdocs serve

bench: setup
	$(PY) -m bench.trial_overhead
	$(PY) -m bench.trial_repeatability
	$(PY) -m bench.trial_rank_correlation
	$(PY) -m bench.sweep_costs
	$(PY) -m bench.seam_overhead --old $(SEAM_OLD) --new HEAD
	$(PY) -m bench.trial_time_split
	$(PY) -m bench.false_gains
	$(PY) -m bench.search_efficiency --jobs 2
	$(PY) -m bench.profiler_overhead
	$(PY) -m bench.profile_share
	$(PY) -m autotune commbench
	$(PY) -m bench.parallel_utilisation --ks 8 4 1

clean:
	rm -rf runs .pytest_cache
