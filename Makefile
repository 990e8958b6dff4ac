# ferry's thin top level: Debian packages, meson build, tests and the demo. The real build is meson.
SHELL := /bin/bash
BUILD ?= build
BUILD_ASAN ?= build-asan

# Exactly the Debian (bookworm) packages the build, the tests and the demo use.
PACKAGES := g++ pkg-config meson ninja-build clang llvm bpftool \
	libbpf-dev libxdp-dev liburing-dev libboost-dev nlohmann-json3-dev libsystemd-dev libfmt-dev \
	libgtest-dev libgmock-dev libbenchmark-dev \
	python3 iproute2 iputils-ping util-linux procps prometheus

.PHONY: all deps build build-asan test test-unit demo clean

all: build

deps:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done | xargs); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: missing packages: $$missing (run as root)"; exit 1; fi; \
	  echo "make deps: installing $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $$missing >/dev/null; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD)

$(BUILD_ASAN)/build.ninja:
	meson setup $(BUILD_ASAN) -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

build-asan: deps $(BUILD_ASAN)/build.ninja
	meson compile -C $(BUILD_ASAN)

# Every test: unit + integration on the normal build, the unit suite again under ASan+UBSan, then
# one closing "N passed, N failed" line over both runs.
test: build build-asan
	@rc=0; \
	meson test -C $(BUILD) --print-errorlogs || rc=1; \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	  meson test -C $(BUILD_ASAN) --suite unit --print-errorlogs || rc=1; \
	python3 tests/summarize.py $(BUILD)/meson-logs/testlog.json $(BUILD_ASAN)/meson-logs/testlog.json || rc=1; \
	exit $$rc

test-unit: build
	meson test -C $(BUILD) --suite unit --print-errorlogs

demo: build
	tests/lab/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
