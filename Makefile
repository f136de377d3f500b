# amcast: `make demo` and `make test` are all a fresh machine needs; `make check` is CI's.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MATURIN := $(VENV)/bin/maturin
MATURIN_REQ := 'maturin>=1.5,<2'
CARGO_NICE ?= nice
RUST_BUILD = VIRTUAL_ENV=$(abspath $(VENV)) $(CARGO_NICE) $(MATURIN) develop --quiet --release \
	-m native/Cargo.toml
# the extension as last built from these sources: `make test` and `make check` rebuild it
# when one is newer (a stale build would be refused and the tests run pure)
NATIVE_STAMP := $(VENV)/.native-built
NATIVE_SOURCES := $(wildcard native/Cargo.toml native/Cargo.lock native/src/*.rs native/src/*/*.rs)

.PHONY: install test check lint demo docs bench clean deploy-tools lock fuzz container-test \
	man deb rust native wheel native-check native-bench

install: $(STAMP)

$(STAMP): pyproject.toml analytics/javacheck.py analytics/venvspark.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "amcast needs Python >= 3.11")'
	@$(PYTHON) analytics/javacheck.py || echo "*** amcastd runs without Java; amcast analyze and tests/analytics need it"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,analytics]'
	$(PY) analytics/venvspark.py $(VENV)/bin
	@touch $(STAMP)
	@if command -v cargo >/dev/null 2>&1; then \
	  { $(PY) -m pip install --quiet $(MATURIN_REQ) && $(RUST_BUILD) && touch $(NATIVE_STAMP); } || \
	  echo "*** the native data path (native/) did not build: amcast runs its pure-Python core"; \
	else echo "*** no Rust toolchain (cargo): the native data path is not built, amcast runs its pure-Python core (docs/native.md)"; fi

lint: install
	$(VENV)/bin/ruff check .
	$(PY) deploy/typecheck.py

# Two tiers. `make test` is the fast one (a few minutes on two cores): every package's own
# tests, the engines' and the simulator's without the longer sweeps (marked `slow`), the
# daemon, the client and the CLI in-process and against real daemons, the deployment
# files' static checks, the man pages and a real cluster end to end (FAST_PROCESS_TESTS;
# Spark and the `slow` real-process tests are left to `make check`). `make check` is
# everything, as CI runs it (.ci/run): the whole suite, the Debian package built and
# unpacked, then the Rust crate's clippy and cargo test (native-check).
#
# The deterministic tests (the engines, the simulator and its sweeps: virtual time, no
# sockets, no processes) run on every core with pytest-xdist; the rest (real daemons,
# sockets, timeouts, Spark) runs after them on PROCESS_WORKERS workers, a test module at a
# time on each (the analytics tests as one: tests/conftest.py). Those tests mostly wait
# on timeouts (one worker kept a core 72% busy), so two share two cores.
PURE_TESTS := tests/ordering tests/reliable tests/wire tests/membership tests/node \
	tests/multigroup tests/federation tests/simulation tests/simulation_cluster tests/fuzz \
	tests/swap \
	tests/native tests/test_layering.py \
	tests/test_sans_io.py
TEST_WORKERS ?= auto
PROCESS_WORKERS ?= 2
# -m replaces pyproject's addopts marker expression: `container` stays out here too
FAST_MARKS := not slow and not spark and not container
FAST_PROCESS_TESTS := tests/cli tests/client tests/daemon tests/analytics \
	tests/packaging/test_manpages.py tests/deploy/test_config_reference.py \
	tests/deploy/test_systemd.py tests/deploy/test_kubernetes.py tests/deploy/test_prometheus.py \
	tests/e2e/test_cluster_e2e.py

test: install lint $(NATIVE_STAMP)
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist worksteal -m "$(FAST_MARKS)" $(PURE_TESTS)
	$(VENV)/bin/pytest -q -n $(PROCESS_WORKERS) --dist loadfile -m "$(FAST_MARKS)" \
	  $(FAST_PROCESS_TESTS)

check: install lint $(NATIVE_STAMP)
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist worksteal $(PURE_TESTS)
	$(VENV)/bin/pytest -q -n $(PROCESS_WORKERS) --dist loadfile $(addprefix --ignore=,$(PURE_TESTS))
	@if command -v cargo >/dev/null 2>&1; then $(MAKE) --no-print-directory native-check; \
	else echo "*** no Rust toolchain (cargo): the native crate's clippy and cargo test skipped"; fi

# Man pages (amcast(1), amcastd(8)) and bash/zsh completion generated from the parsers
# (deploy/manpages.py) into MAN_DIR; `man -l build/man/man8/amcastd.8` reads one.
MAN_DIR ?= build/man

man: install
	$(PY) deploy/manpages.py $(MAN_DIR)

# The Debian package (docs/install.md): dist/amcast_<version>_<arch>.deb, a virtualenv
# in /opt/amcast made with /usr/bin/python3 plus /usr/bin links, the systemd units, man
# pages, completion and /etc/amcast/amcastd.toml. Needs dpkg-deb.
deb: install
	$(PY) deploy/build_deb.py --out dist

# The documentation site (mkdocs.yml, docs/) into site/, warnings as errors: a broken
# internal link or anchor, or a page missing from the nav, fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

DEMO_DIR ?= var/demo
REPORT_DIR ?= var/demo-report

demo: install
	rm -rf $(DEMO_DIR)/node*/logs $(REPORT_DIR)
	@$(VENV)/bin/amcast demo --dir $(DEMO_DIR); demo=$$?; \
	$(VENV)/bin/amcast analyze $(DEMO_DIR) --out $(REPORT_DIR) --window 0.05; audit=$$?; \
	echo "analysis report: $(REPORT_DIR)/index.html"; \
	echo "failover demo (a daemon killed and restarted, another paused): $(VENV)/bin/amcast demo --faults"; \
	exit $$(( demo || audit ))

# Tools the deployment tests call (tests/deploy): docker-compose validates the compose
# file without an engine, promtool (Debian's prometheus) checks the Prometheus files;
# and libfaketime, the nemesis' clock steps (tests/nemesis).
# Installed with apt-get only when missing; CI (.ci/run) runs this before `make check`.
deploy-tools:
	@missing=""; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v faketime >/dev/null || missing="$$missing faketime"; \
	if [ -z "$$missing" ]; then echo "deploy tools present"; \
	elif command -v apt-get >/dev/null; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else echo "missing:$$missing (install them to run tests/deploy; they are skipped without)"; fi

# The image built and the compose cluster run, over multicast and over unicast, in a
# private Docker engine (tests/deploy/test_container_cluster.py; root; a few minutes,
# see docs/operations.md, "Containers"). Not part of `make test` or `make check`.
CONTAINER_TOOLS := dockerd:docker.io docker-compose:docker-compose debootstrap:debootstrap \
	prometheus:prometheus nsenter:util-linux

container-test: install
	@[ "$$(id -u)" = 0 ] || { echo "make container-test needs root (dockerd, network namespaces, debootstrap)"; exit 2; }
	@missing=""; for pair in $(CONTAINER_TOOLS); do \
	  command -v $${pair%%:*} >/dev/null || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	  || { echo "make container-test: could not install$$missing"; exit 2; }; fi
	PYTHON=$(PY) $(VENV)/bin/pytest -m container -v -s -p no:cacheprovider tests/deploy/test_container_cluster.py

# Pinned dependency locks for the container image (Dockerfile).
lock:
	PYTHON=$(PYTHON) sh deploy/lock.sh

# The benchmarks live in bench/, beside the package (not installed): `amcast bench NAME`
# runs one from this checkout, as does `python -m bench NAME` here (docs/development.md).
bench: install
	$(VENV)/bin/amcast bench engine

# Coverage-guided fuzzing (fuzz/, atheris): FUZZ_SECONDS per target, one target at a
# time under nice; the corpus accumulates in var/fuzz, the summary goes to
# docs/fuzz/results.md. atheris is installed here on demand, never by `make install`.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= datagram sealed native_sealed native_decode frames envelope config federation

fuzz: install
	@$(PY) -c 'import atheris' 2>/dev/null || $(PY) -m pip install --quiet atheris || { \
	  echo "*** make fuzz needs atheris, which could not be installed into $(VENV):"; \
	  echo "*** pip needs a wheel for this Python/platform (CPython 3.11+ on x86_64 Linux)"; \
	  echo "*** or clang with libFuzzer to build one (see https://github.com/google/atheris)"; \
	  exit 1; }
	$(PY) -m fuzz.campaign --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The native data path in Rust (native/, docs/native.md): the extension module
# amcast_native built by maturin into the virtual environment (`make install` runs this
# when cargo is present), an abi3 wheel in dist/ for hosts without a toolchain, and the
# crate's own checks. AMCAST_CORE=pure|native|auto picks the core at run time.
# (The install step builds it with the same command, not through `make rust`, which
# depends on the install stamp.)
rust: $(STAMP) $(MATURIN)
	$(RUST_BUILD)
	@touch $(NATIVE_STAMP)

$(NATIVE_STAMP): $(NATIVE_SOURCES) | $(STAMP)
	@if command -v cargo >/dev/null 2>&1; then $(MAKE) --no-print-directory rust; \
	else echo "*** no Rust toolchain (cargo): the native data path is not built, amcast runs its pure-Python core (docs/native.md)"; fi

native: rust

$(MATURIN): $(STAMP)
	$(PY) -m pip install --quiet $(MATURIN_REQ)

wheel: $(STAMP) $(MATURIN)
	$(CARGO_NICE) $(MATURIN) build --release -m native/Cargo.toml --out dist

native-check:
	cd native && $(CARGO_NICE) cargo clippy --all-targets -- -D warnings
	cd native && $(CARGO_NICE) cargo clippy --all-targets --no-default-features -- -D warnings
	cd native && $(CARGO_NICE) cargo test --no-default-features

native-bench: rust
	$(PY) native/bench/bench_wire.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis site native/target
