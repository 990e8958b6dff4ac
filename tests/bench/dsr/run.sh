#!/usr/bin/env bash
# Direct server return next to the TCP proxy on long streams (streams.py says how): iperf3 -P 4
# through an ipip service and through a proxy service of the same ferryd, and straight to the
# backend, each direction; the gateway's CPU seconds per GiB. Writes tests/bench/results/dsr-streams.md.
# Not part of make test; root (network namespaces, XDP). About 2 minutes by default.
#
#   tests/bench/dsr/run.sh [BUILD_DIR]          (default: build; ferryd, ferryctl, ferry-decap built)
#
# Environment: SECONDS_PER_RUN=5 REPEAT=3 OUT=FILE.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
for p in ferryd ferryctl ferry-decap; do
  [ -x "$build/daemon/$p" ] || { echo "run.sh: no $build/daemon/$p; build it first" >&2; exit 1; }
done
command -v iperf3 >/dev/null || { echo "run.sh: iperf3 missing (apt-get install iperf3)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (netns, XDP)" >&2; exit 1; }
export FERRYD="$build/daemon/ferryd" FERRYCTL="$build/daemon/ferryctl" FERRY_DECAP="$build/daemon/ferry-decap"
export SOURCE_ROOT="$root"
exec /usr/bin/python3 "$here/streams.py" --out "${OUT:-$root/tests/bench/results/dsr-streams.md}" \
  --seconds "${SECONDS_PER_RUN:-5}" --repeat "${REPEAT:-3}"
