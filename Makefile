# vcpulab — the two commands that matter: `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
VPY     := $(VENV)/bin/python
VPIP    := $(VPY) -m pip
CARGO   ?= cargo

.PHONY: demo test test-rust test-python install bench lint lint-python lint-rust fmt clean

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPIP) install -q --upgrade pip

# Build the Rust core and install the Python package (with dev extras) into .venv.
install: $(VPY)
	$(VPIP) install -q -e '.[dev]'

# The main job on the built-in examples: one run, a slice sweep with confidence
# intervals (kept in vcpulab-results.sqlite: a second `make demo` reuses it), a trace.
demo: install
	$(VENV)/bin/vcpulab run scenarios/examples/weights-1-1-2-4.toml
	$(VENV)/bin/vcpulab sweep scenarios/examples/xen-slice-sweep.toml \
		--grid host.scheduler.slice_ms=30,10,1 --seeds 3
	$(VENV)/bin/vcpulab trace scenarios/examples/xen-slice-sweep.toml \
		--set run.duration=300ms -o out/demo-trace.json

test: test-rust test-python

# The `quick` profile: release optimization without fat LTO. Each test binary linked
# with fat LTO and one codegen unit took 11 min to build on a 2-core machine, 3.7 min
# this way; the tests are the same code at the same optimization level.
test-rust:
	$(CARGO) test --workspace --profile quick --quiet

# Ray is an optional extra for users; the tests exercise it for real, so install it here
# (about 20 s from wheels). Its tests skip where Ray is missing. The tests run in one
# worker process per core (pytest-xdist): on a 2-core machine 3.2 instead of 4.8 min.
test-python: install
	$(VPIP) install -q 'ray[default]>=2.9'
	$(VPY) -m pytest -q -n auto tests

bench:
	$(CARGO) run --release --quiet -p vcpulab-core --bin vcpulab-bench

lint: lint-python lint-rust

lint-python: $(VPY)
	$(VPIP) install -q ruff mypy pandas-stubs
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests
	$(VENV)/bin/mypy

lint-rust:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf $(VENV)
