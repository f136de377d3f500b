# amcast: `make demo` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml analytics/javacheck.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "amcast needs Python >= 3.11")'
	@$(PYTHON) -m analytics.javacheck || echo "*** amcastd runs without Java; amcast analyze and tests/analytics need it"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,analytics]'
	@touch $(STAMP)

lint: install
	$(VENV)/bin/ruff check .

test: install lint
	$(VENV)/bin/pytest -q

DEMO_DIR ?= var/demo
REPORT_DIR ?= var/demo-report

demo: install
	rm -rf $(DEMO_DIR)/node*/logs $(REPORT_DIR)
	@$(VENV)/bin/amcast demo --dir $(DEMO_DIR); demo=$$?; \
	$(VENV)/bin/amcast analyze $(DEMO_DIR) --out $(REPORT_DIR) --window 0.05; audit=$$?; \
	echo "analysis report: $(REPORT_DIR)/index.html"; \
	exit $$(( demo || audit ))

bench: install
	$(VENV)/bin/amcast bench engine

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
