# ferry's thin top level: Debian packages, meson build, tests and the demo. The real build is meson.
SHELL := /bin/bash
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
BUILD_TSAN ?= build-tsan
# Seconds each fuzz target runs: in `make fuzz`, and in the smoke run of `make test` (two at a time).
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 35

# Exactly the Debian (bookworm) packages the demo needs: what configures the tree (meson looks
# for gtest/gmock when it sets the tests up) and builds ferryd and ferryctl, and what the lab runs.
DEMO_PACKAGES := g++ pkg-config meson ninja-build clang llvm bpftool \
	libbpf-dev libxdp-dev liburing-dev libboost-dev nlohmann-json3-dev libsystemd-dev libfmt-dev \
	libgtest-dev libgmock-dev python3 iproute2 util-linux procps
# ... and the packages the rest of the build, the tests and the benchmarks use.
PACKAGES := $(DEMO_PACKAGES) libbenchmark-dev libfuzzer-14-dev \
	iputils-ping iputils-tracepath prometheus netsniff-ng \
	debhelper dpkg-dev fakeroot lintian systemd strace man-db python3-matplotlib python3-pytest \
	dnsmasq-base bind9-dnsutils dnsperf nftables ccache systemd-container nginx-light haproxy \
	bird2 iperf3 libnginx-mod-stream \
	libngtcp2-dev libngtcp2-crypto-gnutls-dev libnghttp3-dev libgnutls28-dev ngtcp2-client

.PHONY: all deps demo-deps build build-asan build-fuzz build-tsan test test-unit fuzz demo package clean

all: build

# `install_missing packages`: installs those of the packages that are not installed (as root).
install_missing = missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done | xargs); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make: missing packages: $$missing (run as root)"; exit 1; fi; \
	  echo "make: installing $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $$missing >/dev/null; \
	fi

deps:
	@$(call install_missing,$(PACKAGES))

demo-deps:
	@$(call install_missing,$(DEMO_PACKAGES))

$(BUILD)/build.ninja:
	meson setup $(BUILD)

$(BUILD_ASAN)/build.ninja:
	meson setup $(BUILD_ASAN) -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug

# The libFuzzer targets are a clang project of their own (tests/fuzz/meson.build).
$(BUILD_FUZZ)/build.ninja:
	meson setup --native-file tests/fuzz/clang.ini $(BUILD_FUZZ) tests/fuzz

# gcc's -Wtsan ("atomic_thread_fence is not supported with -fsanitize=thread") would break -Werror.
$(BUILD_TSAN)/build.ninja:
	meson setup $(BUILD_TSAN) -Db_sanitize=thread -Db_lundef=false -Dcpp_args=-Wno-tsan

# The ASan+UBSan runs: any finding ends the process with status 86, which no ferry program uses, so
# a test that checks an exit status also fails on a report in a stderr it does not read (the
# integration harness reads ferryd's log for them too); UBSan stops at its first finding.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:exitcode=86 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=86
# Integration tests the ASan+UBSan run leaves out, as they run no ferry C++ code worth checking
# there (docs/testing.md says why for each); `asan_integration_tests` names the rest.
ASAN_INTEGRATION_SKIP := integration_package integration_systemd_boot integration_bench_plots
asan_integration_tests = meson introspect $(BUILD_ASAN) --tests | python3 -c 'import json, sys; \
  print(*[t["name"] for t in json.load(sys.stdin) if "ferry:integration" in t["suite"] \
          and t["name"] not in sys.argv[1:]])' $(ASAN_INTEGRATION_SKIP)

# The TSan run: the unit tests of the threaded runtime and of the xsk rings (runtime_*, xsk_*).
# `tsan_pick targets` names their executables (only those are compiled), `tsan_pick tests` the tests.
tsan_pick = meson introspect $(BUILD_TSAN) --tests | python3 -c 'import json, os, sys; \
  tests = [t for t in json.load(sys.stdin) if t["name"].startswith(("runtime_", "xsk_"))]; \
  print(*dict.fromkeys(os.path.relpath(t["cmd"][0], "$(BUILD_TSAN)") if sys.argv[1] == "targets" \
                       else t["name"] for t in tests))' $(1)

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

build-asan: deps $(BUILD_ASAN)/build.ninja
	meson compile -C $(BUILD_ASAN)

build-fuzz: deps $(BUILD_FUZZ)/build.ninja
	meson compile -C $(BUILD_FUZZ) -j 2

build-tsan: deps $(BUILD_TSAN)/build.ninja
	@targets=$$($(call tsan_pick,targets)); \
	if [ -z "$$targets" ]; then echo "build-tsan: no runtime_* or xsk_* unit tests found"; exit 1; fi; \
	meson compile -C $(BUILD_TSAN) -j 2 $$targets

# Every test: unit + integration on the normal build, the unit and the integration suite again
# under ASan+UBSan (the latter in testlog-integration.json, less ASAN_INTEGRATION_SKIP), each fuzz
# target for FUZZ_SMOKE_SECONDS, the runtime and xsk unit tests under TSan, then a line per run and
# one closing "N passed, N failed" line over all five (docs/testing.md).
test: build build-asan build-fuzz build-tsan
	@rc=0; \
	meson test -C $(BUILD) --print-errorlogs || rc=1; \
	$(SANITIZER_ENV) meson test -C $(BUILD_ASAN) --suite unit --print-errorlogs || rc=1; \
	tests=$$($(asan_integration_tests)) && [ -n "$$tests" ] && $(SANITIZER_ENV) meson test \
	  -C $(BUILD_ASAN) --no-rebuild --logbase testlog-integration --print-errorlogs $$tests || rc=1; \
	FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) meson test -C $(BUILD_FUZZ) --num-processes 2 --print-errorlogs || rc=1; \
	TSAN_OPTIONS=second_deadlock_stack=1 \
	  meson test -C $(BUILD_TSAN) --no-rebuild --print-errorlogs $$($(call tsan_pick,tests)) || rc=1; \
	python3 tests/summarize.py $(BUILD)/meson-logs/testlog.json $(BUILD_ASAN)/meson-logs/testlog.json \
	  $(BUILD_ASAN)/meson-logs/testlog-integration.json $(BUILD_FUZZ)/meson-logs/testlog.json \
	  $(BUILD_TSAN)/meson-logs/testlog.json || rc=1; \
	exit $$rc

test-unit: build
	meson test -C $(BUILD) --suite unit --print-errorlogs

# Each fuzz target for FUZZ_SECONDS (default 600), one after the other; what they learn is kept
# in $(BUILD_FUZZ)/work/<target>/corpus, a crashing input in $(BUILD_FUZZ)/work/<target>/crashes.
fuzz: build-fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) meson test -C $(BUILD_FUZZ) --num-processes 1 --verbose

# The bounded soak (not in make test; root): SOAK_SECONDS (default 600) of UDP + TCP load with a
# reload every second and backend flaps; prints RSS, fds, frames and error counters as a table.
.PHONY: soak
SOAK_SECONDS ?= 600
soak: build
	SOAK_SECONDS=$(SOAK_SECONDS) tests/soak/soak.sh $(BUILD)

# Builds only what the demo runs (ferryd with its BPF object, ferryctl); `make test` builds the rest.
demo: demo-deps $(BUILD)/build.ninja
	meson compile -C $(BUILD) daemon/ferryd daemon/ferryctl
	tests/lab/demo.sh $(BUILD)

# The Debian package (dpkg-buildpackage -us -uc -b from packaging/debian) in build-deb/; its last
# line names the .deb. `make test` builds and checks it too (tests/integration/test_package.py).
package: deps
	packaging/build-deb.sh build-deb

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) $(BUILD_TSAN) build-deb
