# amcast: `make demo` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "amcast needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,analytics]'
	@touch $(STAMP)

lint: install
	$(VENV)/bin/ruff check .

test: install lint
	$(VENV)/bin/pytest -q

demo: install
	$(VENV)/bin/amcast simulate --preset section7

bench: install
	$(VENV)/bin/amcast bench engine

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
