#!/bin/sh
# make soak: the bounded soak (tests/soak/soak.py) against a built ferryd; needs root (netns, XDP).
# Usage: tests/soak/soak.sh [BUILD_DIR]   env: SOAK_SECONDS (600), SOAK_SAMPLE_SECONDS, SOAK_OUT (the
# table), SOAK_TCP_OUT (JSON: each TCP failure, reload and backend kill), SOAK_UDP_PPS (2000)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
export FERRYD="$build/daemon/ferryd" FERRYCTL="$build/daemon/ferryctl" SOURCE_ROOT="$root"
export PYTHONDONTWRITEBYTECODE=1
[ -x "$FERRYD" ] || { echo "soak: $FERRYD is not built (make build)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "soak: needs root for the netns lab and XDP" >&2; exit 1; }
echo "soak: ${SOAK_SECONDS:-600} s of UDP + TCP load with reloads and backend flaps" >&2
cd "$root/tests/integration"
exec python3 "$here/soak.py"
