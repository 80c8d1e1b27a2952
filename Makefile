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
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[hf,deploy,nerf,xai,dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/paperzoo data fetch fashion-mnist
	$(VENV)/bin/paperzoo reproduce fashion-cnn

test: $(STAMP)
	$(VENV)/bin/python -m pytest

.PHONY: setup demo test
