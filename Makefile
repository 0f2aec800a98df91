# SPDX-License-Identifier: BSD-3-Clause
# nvmelab — every target works from a fresh clone: each depends on `env`.
#   make book   environment, build, the HTML book from the committed `standard` records (measures nothing;
#               NVMELAB_RUN=missing measures what this host's records lack, PRESET=paper another preset)
#   make test   the default test run (C tests, Python tests, notebooks, book checks)
# Each target first checks what it needs from the system (env/prereqs.sh, one place for all of them):
# env/build/book/test stop naming the Debian packages to install; the extra legs (test-qemu,
# test-browser, bench, records) install their own packages when run as root on Debian.
SHELL      := /bin/bash
PYTHON     ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
BUILD      := build/dev
JOBS       ?= $(shell nproc)
# Preset: empty = the target's own (test-notebooks: quick, a smoke test; book: standard, measured records).
PRESET     ?=
# May the book's notebooks measure? never: the committed records only; missing: run what this host lacks.
NVMELAB_RUN ?= never
STAMP      := $(VENV)/.nvmelab-env
LOCK       := env/requirements.lock
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

QEMU_ARGS  ?=
PREREQS    := PYTHON="$(PYTHON)" VENV=$(VENV) bash env/prereqs.sh

.PHONY: help env build test test-c test-py test-busy test-notebooks test-book test-browser test-sanitize test-qemu \
	    test-gpu conformance bench bench-gpu records book lab clean format wheelhouse gpu-lease rehearse-gpu-host \
	    check-env check-build check-sanitize check-qemu check-browser check-bench check-records check-gpu \
	    fuzz check-fuzz test-scratch

help:
	@echo "make book | test | env | build | lab | bench [BENCH=blksum] | bench-gpu | test-sanitize | test-qemu [QEMU_ARGS=--short]"
	@echo "     conformance SPDK_DIR=... | test-browser | test-nbd | test-gpu | wheelhouse | records [STUDY=all RECORDS_PRESET=standard RECORDS_ARGS=--replace] | clean"
	@echo "     fuzz [FUZZ_SECONDS=30] | test-busy [HOG_CPUS=N] | test-scratch"
	@echo "     gpu-lease (call 0, here) | rehearse-gpu-host [OUT=DIR]"

# --- system prerequisites (env/prereqs.sh): checked first, in well under a second ---
check-env:
	@$(PREREQS) env
check-build:
	@$(PREREQS) build
check-sanitize:
	@$(PREREQS) sanitize
check-qemu:
	@$(PREREQS) --install qemu
check-browser:
	@$(PREREQS) --install browser
check-bench:
	@$(PREREQS) --install bench
check-records:
	@$(PREREQS) --install records
check-nbd:
	@$(PREREQS) --install nbd
check-fuzz:
	@$(PREREQS) --install fuzz
check-gpu:
	@$(PREREQS) gpu

# --- environment: .venv from the lock; idempotent, a no-op when nothing changed ---
env: $(STAMP)
$(STAMP): $(LOCK) env/setup-venv.sh | check-env
	bash env/setup-venv.sh $(VENV) $(LOCK) "$(PYTHON)"
	@touch $@

# --- native build: the extension lands in src/nvmelab (the venv sees src/ via a .pth) ---
# The configure step's own lines ("nvmelab: ...", one per optional part) are shown; the rest of its
# output is kept in $(BUILD)/configure.log and printed only when it fails.
build: check-build env
	@mkdir -p $(BUILD)
	@flock $(BUILD)/.lock bash -c '\
	  cmake -S . -B $(BUILD) -G Ninja -DNVMELAB_INPLACE=ON -DNVMELAB_TESTS=ON -DNVMELAB_SANITIZE=OFF \
	    -DPython_EXECUTABLE=$(CURDIR)/$(PY) -Dpybind11_DIR=$$($(PY) -m pybind11 --cmakedir) \
	    > $(BUILD)/configure.log 2>&1 || { cat $(BUILD)/configure.log; exit 1; }; \
	  sed -n "s/^-- nvmelab: /nvmelab: /p" $(BUILD)/configure.log; \
	  cmake --build $(BUILD) -j $(JOBS)'

# --- tests ---
test: build
	$(MAKE) --no-print-directory test-c test-py test-notebooks test-book

test-c: build
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -j $(JOBS)

test-py: build
	$(PY) -m pytest tests -q -p no:cacheprovider --ignore=tests/book

# The Python tests beside a CPU hog on every CPU (stress-ng, else a bash busy loop per CPU; env/with-cpu-hog.sh),
# always stopped: a test must key what it asserts to what its runs measured, never to a quiet host (issue 33).
test-busy: build
	bash env/with-cpu-hog.sh $(PY) -m pytest tests -q -p no:cacheprovider --ignore=tests/book

# A new row of an engine's C parameter table reaches the CLI, the study specs, the records and the CPU stand-in
# with no Python edit (issue 37): the extension built from a copy of the tree with one row added (minutes; CI leg).
test-scratch: build
	NVMELAB_SCRATCH_BUILD=1 $(PY) -m pytest -q -p no:cacheprovider -rs tests/scratch

test-notebooks: build
	NVMELAB_PRESET=$(or $(PRESET),quick) NVMELAB_RUN=auto \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env notebooks

test-book: book
	$(PY) -m pytest -q -p no:cacheprovider tests/book

# The book's page check in a real browser: installs chromium (root, Debian), then the same tests as
# test-book, where a browser test that skips for want of chromium fails instead.
test-browser: check-browser book
	NVMELAB_NO_SKIP=chromium $(PY) -m pytest -q -p no:cacheprovider -rs tests/book

test-sanitize: check-sanitize env
	cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNVMELAB_SANITIZE=ON -DNVMELAB_TESTS=ON \
	  -DNVMELAB_PYTHON=OFF -DNVMELAB_CUDA=OFF >/dev/null
	cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build/asan --output-on-failure -j $(JOBS)

# QEMU_ARGS=--short: the quick subset of each leg (what .ci/run runs)
test-qemu: check-qemu build
	bash env/qemu/run.sh $(QEMU_ARGS)

# The Linux kernel's nvme driver on our controller (issue 36): QEMU >= 10.1 built from Debian's source package
# (cached in env/qemu/work), a TCG guest on nvmelab-serve through vfio-user-pci; its log goes to
# data/results/conformance/kernel-nvme.log. Root on Debian; not a CI leg (the first run builds QEMU: 7 min on 2 cores).
.PHONY: test-kernel
test-kernel: build
	bash env/qemu/kernel.sh $(KERNEL_ARGS)

# SPDK's own NVMe driver against `nvmelab serve` (issue 35): spdk_nvme_identify and the conformance suite
# nvme_compliance, from the SPDK build SPDK_DIR names (the project never builds SPDK). Their logs, headed by
# both commits, go to data/results/conformance/. SPDK's environment wants hugepages on a hugetlbfs mount.
conformance: build
	@test -n "$(SPDK_DIR)" || { echo "make conformance: set SPDK_DIR to an SPDK build with vfio-user support (its build/bin and test/nvme/compliance)"; exit 2; }
	@grep -qs hugetlbfs /proc/mounts || { echo "make conformance: SPDK needs hugepages on a hugetlbfs mount (root: nvmelab hugepages 1024; mount -t hugetlbfs nodev /dev/hugepages)"; exit 2; }
	NVMELAB_CONFORMANCE_LOG_DIR=$(CURDIR)/data/results/conformance SPDK_DIR=$(SPDK_DIR) \
	  $(PY) -m pytest -q -p no:cacheprovider -rs tests/test_vfio_user.py -k spdk

# blksum's NBD and qemu legs (qemu-utils, libnbd-dev installed first; the build then finds libnbd):
# the tests that `make test` skips for want of them, here made to fail instead
test-nbd: check-nbd build
	NVMELAB_NO_SKIP=nbd $(PY) -m pytest -q -p no:cacheprovider -rs tests/test_blksum_native.py \
	  tests/test_blksum_qcow2_crafted.py tests/test_blksum_nbd_robust.py

# GPU tests (a CUDA GPU host; see README): skipped with a reason in `make test` elsewhere
test-gpu: check-gpu build
	$(PY) -m pytest -q -p no:cacheprovider -rs -m gpu $$(grep -l "mark.gpu" tests/test_*.py)
	ctest --test-dir $(BUILD) -R test_cuda_queue_host --output-on-failure

# --- fuzzing (tests/fuzz/README.md): every harness tests/fuzz/fuzz_<name>.{c,py} for FUZZ_SECONDS on a copy of its
# committed seeds (tests/fuzz/corpus/<name>/) under ASan+UBSan; any crash, leak, timeout or out-of-memory input
# fails, its input kept under build/fuzz/fuzz-work/<name>/. The C harnesses are built with clang (installed
# first: root, Debian) in build/fuzz; the Python ones run on atheris, installed into build/fuzz/py (not the lock).
FUZZ_SECONDS ?= 30
FUZZ_BUILD   := build/fuzz
ATHERIS      := atheris==3.0.0
fuzz: check-fuzz env
	@mkdir -p $(FUZZ_BUILD)
	@flock $(FUZZ_BUILD)/.lock bash -c '\
	  cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNVMELAB_FUZZ=ON -DNVMELAB_TESTS=OFF -DNVMELAB_PYTHON=OFF -DNVMELAB_CUDA=OFF \
	    > $(FUZZ_BUILD)/configure.log 2>&1 || { cat $(FUZZ_BUILD)/configure.log; exit 1; }; \
	  cmake --build $(FUZZ_BUILD) -j $(JOBS)'
	@test -d $(FUZZ_BUILD)/py/$(subst ==,-,$(ATHERIS)).dist-info || \
	  $(PY) -m pip install -q --disable-pip-version-check --target $(FUZZ_BUILD)/py $(ATHERIS)
	PYTHONPATH=$(CURDIR)/$(FUZZ_BUILD)/py bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(PY)

# --- benchmarks: results under data/results/bench/ ---
# BENCH=NAME ...: only those benchmarks (tests/bench/bench_NAME.py), e.g. BENCH=blksum
BENCH ?=
bench: check-bench build
	$(PY) -m tests.bench $(if $(BENCH),--only $(BENCH))

bench-gpu: check-gpu build
	$(PY) -m tests.bench --gpu

# --- records: the studies' sweeps measured on this host, under data/results/<study>/<host>/ ---
# STUDY=all (default) runs, one after the other, every study this host has the engine for and
# names the others (the device-initiated ones need a CUDA GPU). It resumes what the host's records
# lack; RECORDS_ARGS=--replace moves them aside (kept, git-ignored) and measures every run again.
# The sweep refuses a busy host (RECORDS_ARGS=--busy-ok overrides). Installs stress-ng first (root,
# Debian). `make book` and `make test` never need it: they read the committed records.
STUDY          ?= all
RECORDS_PRESET ?= standard
RECORDS_ARGS   ?=
records: check-records build
	$(PY) -m nvmelab study run $(STUDY) --preset $(RECORDS_PRESET) $(RECORDS_ARGS)

# --- book ---
book: build
	$(PY) -m nvmelab.results.model_validation
	NVMELAB_PRESET=$(or $(PRESET),standard) NVMELAB_RUN=$(NVMELAB_RUN) \
	  $(PY) -m sphinx -W --keep-going -n -b html book book/_build/html
	@echo "book: open book/_build/html/index.html"

# --- style: clang-format for C/C++/CUDA, ruff for Python (both pinned in the lock); tests/test_style.py checks ---
format: env
	$(VENV)/bin/clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp')
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

lab: build
	$(PY) -m jupyter lab notebooks

# --- wheels for a GPU host without a package index (see env/README.md) ---
wheelhouse: env
	bash env/wheelhouse.sh

# --- the GPU lease plan (env/gpu-lease.sh; README "On a GPU host") ---
# Here, before a lease: the wheelhouse and the cp312 wheel to carry (call 0). On the GPU host the two device
# calls are `bash env/gpu-lease.sh 1 $OUT` and `bash env/gpu-lease.sh 2 $OUT` (no make there). Neither needs
# `env`: the GPU host has no .venv and no package index.
gpu-lease:
	bash env/gpu-lease.sh 0

# The lease plan's calls on a simulated GPU host here (Python 3.12 with the image's packages and the
# wheelhouse only, pip --no-index, a non-editable install, the CPU stand-in for the GPU parts), by the
# device command lines themselves; OUT (default build/rehearse/out) ends with each call's outputs.
rehearse-gpu-host: check-build
	bash env/gpu-lease.sh rehearse $(or $(OUT),$(CURDIR)/build/rehearse/out)

clean:
	rm -rf build book/_build book/.jupyter_cache src/nvmelab/_native*.so
