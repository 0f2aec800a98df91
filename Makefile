# nvmelab — every target works from a fresh clone: each depends on `env`.
#   make book   environment, build, execute the notebooks on emu://, HTML book
#   make test   the default test run (C tests, Python tests, notebooks, book checks)
SHELL      := /bin/bash
PYTHON     ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
BUILD      := build/dev
JOBS       ?= $(shell nproc)
PRESET     ?= quick
STAMP      := $(VENV)/.nvmelab-env
LOCK       := env/requirements.lock
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help env build test test-c test-py test-notebooks test-book test-sanitize test-qemu test-gpu \
	    bench bench-gpu book lab clean wheelhouse

help:
	@echo "make book | test | env | build | lab | bench | bench-gpu | test-sanitize | test-qemu | wheelhouse | clean"

# --- environment: .venv from the lock; idempotent, a no-op when nothing changed ---
env: $(STAMP)
$(STAMP): $(LOCK) env/setup-venv.sh
	bash env/setup-venv.sh $(VENV) $(LOCK) "$(PYTHON)"
	@touch $@

# --- native build: the extension lands in src/nvmelab (the venv sees src/ via a .pth) ---
build: env
	@mkdir -p $(BUILD)
	flock $(BUILD)/.lock bash -c '\
	  cmake -S . -B $(BUILD) -G Ninja -DNVMELAB_INPLACE=ON -DNVMELAB_TESTS=ON -DNVMELAB_SANITIZE=OFF \
	    -DPython_EXECUTABLE=$(CURDIR)/$(PY) -Dpybind11_DIR=$$($(PY) -m pybind11 --cmakedir) >/dev/null && \
	  cmake --build $(BUILD) -j $(JOBS)'

# --- tests ---
test: build
	$(MAKE) --no-print-directory test-c test-py test-notebooks test-book

test-c: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-py: build
	$(PY) -m pytest tests -q -p no:cacheprovider --ignore=tests/book

test-notebooks: build
	NVMELAB_PRESET=$(PRESET) $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env notebooks

test-book: book
	$(PY) -m pytest -q -p no:cacheprovider tests/book

test-sanitize: env
	cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNVMELAB_SANITIZE=ON -DNVMELAB_TESTS=ON \
	  -DNVMELAB_PYTHON=OFF -DNVMELAB_CUDA=OFF >/dev/null
	cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build/asan --output-on-failure -j $(JOBS)

test-qemu: build
	bash env/qemu/run.sh

# GPU tests (a CUDA GPU host; see README): skipped with a reason in `make test` elsewhere
test-gpu: build
	bash tests/gpu/run_on_gpu_host.sh test

# --- benchmarks: results under data/results/bench/ ---
bench: build
	$(PY) -m tests.bench

bench-gpu: build
	$(PY) -m tests.bench --gpu

# --- book ---
book: build
	NVMELAB_PRESET=$(PRESET) $(PY) -m sphinx -W --keep-going -n -b html book book/_build/html
	@echo "book: open book/_build/html/index.html"

lab: build
	$(PY) -m jupyter lab notebooks

# --- wheels for a GPU host without a package index (see env/README.md) ---
wheelhouse: env
	bash env/wheelhouse.sh

clean:
	rm -rf build book/_build book/.jupyter_cache src/nvmelab/_native*.so
