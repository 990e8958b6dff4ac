#!/usr/bin/env bash
# ferry's HTTP parsers next to Boost.Beast's (not part of make test), for issue 26's question
# whether the /metrics request head and the http check's status line should move onto Beast:
#   1. the unchanged unit tests of lib/metrics/http_request and lib/health/http_status, linked
#      once against ferry's parsers and once against beast_request.cc / beast_status.cc (Beast's
#      basic_parser with ferry's limits around it): which behaviours the tests pin Beast keeps;
#   2. the CPU time (least of ROUNDS) and code size of compiling each translation unit, and of
#      lib/metrics/http_server.cc with a Beast session instantiated in it (beast_session_probe.cc).
#   tests/bench/http/beast_parsers_ab.sh [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
here=$root/tests/bench/http
rounds=${1:-3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cxx=(g++ -std=c++20 -O2 -g -DBOOST_ASIO_NO_DEPRECATED -I"$root")
export CCACHE_DISABLE=1

echo "== unit tests against each parser"
run_tests() {  # NAME TEST_SOURCE PARSER_SOURCE
  "${cxx[@]}" -O1 "$2" "$3" -lfmt -lgtest -lgtest_main -pthread -o "$work/$1"
  local out failed
  out=$("$work/$1" 2>&1 || true)
  failed=$(grep -E '^\[  FAILED  \] [A-Za-z0-9_./]+ \(' <<<"$out" | sed 's/^\[  FAILED  \] //; s/ (.*//' || true)
  printf '%-14s %s of %s tests fail\n' "$1" "$(grep -c . <<<"$failed" || true)" \
    "$(grep -cE '^\[ RUN      \]' <<<"$out")"
  [ -z "$failed" ] || sed 's/^/    /' <<<"$failed"
}
run_tests ferry_request "$root/tests/unit/metrics/http_request_test.cc" \
  "$root/lib/metrics/http_request.cc"
run_tests beast_request "$root/tests/unit/metrics/http_request_test.cc" "$here/beast_request.cc"
run_tests ferry_status "$root/tests/unit/health/http_status_test.cc" "$root/lib/health/http_status.cc"
run_tests beast_status "$root/tests/unit/health/http_status_test.cc" "$here/beast_status.cc"

echo "== compile: least user CPU of $rounds, text bytes of the object"
compile() {  # NAME SOURCE
  local best=""
  for _ in $(seq "$rounds"); do
    t=$({ /usr/bin/time -f '%U' "${cxx[@]}" -c "$2" -o "$work/$1.o"; } 2>&1 | tail -1)
    best=$(awk -v a="$t" -v b="${best:-$t}" 'BEGIN { print (a < b) ? a : b }')
  done
  printf '%-22s %6s s %8s bytes\n' "$1" "$best" "$(size "$work/$1.o" | awk 'NR == 2 { print $1 }')"
}
compile ferry_http_request "$root/lib/metrics/http_request.cc"
compile beast_http_request "$here/beast_request.cc"
compile ferry_http_status "$root/lib/health/http_status.cc"
compile beast_http_status "$here/beast_status.cc"
compile ferry_http_server "$root/lib/metrics/http_server.cc"
compile beast_http_server "$here/beast_session_probe.cc"
