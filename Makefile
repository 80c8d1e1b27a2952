# The two commands of the README: `make demo` (set up, run the main job) and `make test`.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
# The shared read-only data beside the checkout, unless PAPERZOO_DATA says otherwise; without either, the library's
# default (~/.cache/paperzoo, where `paperzoo data fetch` puts sets). Tests of absent sets are skipped, with one line
# saying which and how to fetch them (CI or PAPERZOO_REQUIRE_DATA=1 makes them fail: .ci/run).
export PAPERZOO_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),$(HOME)/.cache/paperzoo)

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c constraints.txt torch==2.13.0
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[hf,deploy,nerf,hub,ws,dev]'
	touch $(STAMP)

# the data folder found above, saved in the venv: later `.venv/bin/paperzoo ...` commands find it without the variable
data-root: $(STAMP)
	@if test -d "$(PAPERZOO_DATA)"; then $(VENV)/bin/paperzoo data use "$(PAPERZOO_DATA)"; fi

setup: $(STAMP)

# The main job: a reproduction (a few minutes; it ends printing the claim and its verdict), then the paper hub
# showing every registered paper with its committed verdict.
demo: $(STAMP) data-root
	$(VENV)/bin/paperzoo data fetch fashion-mnist
	$(VENV)/bin/paperzoo reproduce fashion-cnn
	$(MAKE) --no-print-directory hub

# The paper hub on SQLite: the registry's papers with their reports, plus the bundled SAMPLE of arXiv records and
# mentions (not live data), served on http://127.0.0.1:8000 (src/paperzoo/hub/README.md).
hub: $(STAMP)
	$(VENV)/bin/paperzoo hub init
	$(VENV)/bin/paperzoo hub ingest registry
	$(VENV)/bin/paperzoo hub ingest sample
	$(VENV)/bin/paperzoo hub recommend
	$(VENV)/bin/paperzoo hub serve

test: $(STAMP)
	$(VENV)/bin/python -m pytest

.PHONY: setup data-root demo hub test
