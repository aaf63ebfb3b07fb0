# hoop: the two commands.
#   make demo   set up (packages, build) and run the 4-rank AllReduce benchmark
#   make test   set up and run the test suite (plus the installed-package example)
# Other targets: build, test-asan, test-tsan, bench-kernels, clean.

SHELL := /bin/bash
JOBS ?= 2
APT_PACKAGES := cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
                libfmt-dev libcli11-dev nlohmann-json3-dev ccache libopenblas-dev libhwloc-dev \
                iproute2 python3-torch libtorch-dev pybind11-dev
BIN := build/release/bin

.PHONY: all deps build demo test test-asan test-tsan bench-kernels clean

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

test-tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1 HOOP_TEST_SCALE=small ctest --preset tsan -j $(JOBS) --timeout 900 \
	  -R 'Engine|Waiter|Shm|Tcp|Store|Features'

bench-kernels: build
	$(BIN)/bench_kernels --benchmark_min_time=0.2

clean:
	rm -rf build
