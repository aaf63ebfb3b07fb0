# hoop: the two commands.
#   make demo   set up (packages, build) and run the 4-rank AllReduce benchmark
#   make test   set up and run the test suite (plus the installed-package example)
# Other targets: build, test-asan, test-tsan, fuzz, torch-suite, bench-kernels, clean.

SHELL := /bin/bash
.SECONDEXPANSION:
JOBS ?= 2
APT_PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
                libfmt-dev libcli11-dev nlohmann-json3-dev ccache libopenblas-dev libhwloc-dev \
                iproute2 zlib1g-dev libmimalloc-dev python3-torch libtorch-dev pybind11-dev \
                libopenmpi-dev openmpi-bin libgloo-dev python3-matplotlib python3-sklearn \
                slurmctld slurmd slurm-client munge
BIN := build/release/bin
# ccache (when installed) reuses objects across clones of the project: paths are made relative
# to the clone and the working directory is left out of the hash (debug builds).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all deps build demo test test-asan test-tsan fuzz torch-suite bench-kernels clean

all: build

# Installs the Debian packages the build needs, only those missing.
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

demo: build
	$(BIN)/hoop-run -n 4 -- $(BIN)/hoop-bench allreduce -b 1K -e 64M -f 4

test: build
	ctest --preset release -j $(JOBS) --timeout 600

test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  HOOP_TEST_SCALE=small ctest --preset asan -j $(JOBS) --timeout 900

# ThreadSanitizer over the engine, transport, store, communicator, error and soak suites (whose
# ranks run several threads: progress threads, async work, listeners). Suppressions, each one
# a documented false positive, are in tests/tsan.supp. The programs these suites start are built
# here too. Of the training-survival matrix (Faults/DpSurvive: each ZeRO stage, each place a
# rank dies, each transport) only ZeRO-3 runs here: it makes every collective the other stages
# make, the places and transports are all kept, and the other 24 cases took 120-140 s of the
# stage's 850-940 s of tests.
TSAN_TESTS := 'Engine|Waiter|Shm|Tcp|Store|Features|CommErrors|Soak|P2p|Survive'
TSAN_SKIP := 'Faults/DpSurvive\..*_stage[0-2]_'
test-tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS) --target hoop_tests hoop-run hoop-bench hoop-startup hoop-train
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  HOOP_TEST_SCALE=small HOOP_SOAK_OPS=300 ctest --preset tsan -j $(JOBS) --timeout 900 -R $(TSAN_TESTS) -E $(TSAN_SKIP)

# libFuzzer targets (src/**/fuzz_*.cc), each run FUZZ_SECONDS on its corpus in fuzz/corpus/.
# New inputs go to build/fuzz/new-<target>/ (the corpus in the repository changes only by hand,
# see fuzz/README.md); a crash leaves its input in build/fuzz/ and fails the target.
FUZZ_CXX ?= clang++
FUZZ_SECONDS ?= 25
FUZZ_FLAGS := -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              -Iinclude -Isrc
FUZZ_TARGETS := store_protocol handshake frame
fuzz_store_protocol_SRC := src/bootstrap/fuzz_store_protocol.cc src/bootstrap/store_protocol.cc
fuzz_handshake_SRC := src/transport/tcp/fuzz_handshake.cc src/transport/tcp/handshake.cc
fuzz_frame_SRC := src/transport/fuzz_frame.cc src/transport/frame.cc src/engine/frame_check.cc \
                  src/core/error.cc src/core/types.cc
build/fuzz/fuzz_%: $$(fuzz_%_SRC)
	@mkdir -p build/fuzz
	$(FUZZ_CXX) $(FUZZ_FLAGS) $(fuzz_$*_SRC) -lfmt -o $@
fuzz: deps $(addprefix build/fuzz/fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/new-$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  if ! (cd build/fuzz && ./fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=256 -timeout=10 \
	        -print_final_stats=1 new-$$t ../../fuzz/corpus/$$t >$$t.log 2>&1); then \
	    tail -n 40 build/fuzz/$$t.log; echo "fuzz: $$t failed (its input is in build/fuzz/)"; exit 1; \
	  fi; \
	  grep -E '^Done|^stat::new_units_added' build/fuzz/$$t.log; \
	done

# torch's own distributed test suite on gloo and on hoop, 3 ranks, side by side (minutes):
# the table, and the tests that pass on one backend only. Per-test results and logs go to
# build/release/torch-suite/. See docs/TORCH.md.
torch-suite: build
	PYTHONPATH=$(CURDIR)/build/release/python /usr/bin/python3 bindings/torch/suite/run_suite.py \
	  --log-dir build/release/torch-suite

bench-kernels: build
	$(BIN)/bench_kernels --benchmark_min_time=0.2

clean:
	rm -rf build
