#!/usr/bin/env python3
"""Reads meson testlog.json files, one per run of `make test` (normal, ASan+UBSan unit and
integration, fuzz smoke, TSan), prints a line per run with its wall time and one closing line:
'N passed, N failed'."""
import json
import os
import sys


def run_label(path):
    """build-tsan/meson-logs/testlog.json -> build-tsan; a second run in the same build dir
    (meson test --logbase testlog-integration) -> build-asan integration"""
    build_dir = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    logbase = os.path.basename(path).removesuffix(".json").removeprefix("testlog")
    return f"{build_dir} {logbase.lstrip('-')}" if logbase else build_dir


passed = failed = skipped = 0
for path in sys.argv[1:]:
    run = {"passed": 0, "failed": 0, "skipped": 0}
    start = end = None
    try:
        with open(path) as f:
            for line in f:
                test = json.loads(line)
                result = test.get("result")
                if result in ("OK", "EXPECTEDFAIL"):
                    run["passed"] += 1
                elif result == "SKIP":
                    run["skipped"] += 1
                else:
                    run["failed"] += 1
                if "starttime" in test and "duration" in test:
                    t0, t1 = test["starttime"], test["starttime"] + test["duration"]
                    start = t0 if start is None else min(start, t0)
                    end = t1 if end is None else max(end, t1)
    except (OSError, ValueError) as e:
        print(f"summarize: {path}: {e}", file=sys.stderr)
        run["failed"] += 1
    if run["passed"] + run["failed"] + run["skipped"] == 0:  # an empty log is a run that broke
        print(f"summarize: {path}: no test ran", file=sys.stderr)
        run["failed"] += 1
    wall = f" in {end - start:.0f} s" if start is not None else ""
    print(f"  {run_label(path)}: {run['passed']} passed, {run['failed']} failed"
          + (f", {run['skipped']} skipped" if run["skipped"] else "") + wall)
    passed += run["passed"]
    failed += run["failed"]
    skipped += run["skipped"]

line = f"{passed} passed, {failed} failed"
if skipped:
    # No test here may skip (a privileged test that cannot run fails); a skip is a test that
    # did not check what it names, e.g. exit status 77, which libFuzzer also uses for findings.
    line += f", {skipped} skipped (a skip fails the run)"
print(line)
sys.exit(1 if failed or skipped or passed == 0 else 0)
