"""docs/benchmarks.md's figures: tests/bench/plot.py draws every figure from the committed
result files (so a result file whose tables changed shape fails here, not silently in the docs),
and every image the page shows is one the script draws and is committed under docs/img."""
import os
import re
import subprocess
import tempfile

from harness import SOURCE_ROOT, check, check_eq

PLOT = os.path.join(SOURCE_ROOT, "tests/bench/plot.py")
DOC = os.path.join(SOURCE_ROOT, "docs/benchmarks.md")


def test_plot_draws_every_figure_the_page_shows(workdir):
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run(["/usr/bin/python3", PLOT, os.path.join(SOURCE_ROOT, "tests/bench/results"),
                              out], capture_output=True, text=True, timeout=120)
        check_eq(run.returncode, 0, f"plot.py failed: {run.stderr[-2000:]}")
        drawn = sorted(f for f in os.listdir(out) if f.endswith(".png"))
        for name in drawn:
            check(os.path.getsize(os.path.join(out, name)) > 10_000, f"{name} is a real image")
    shown = sorted(set(re.findall(r"\(img/([^)]+\.png)\)", open(DOC).read())))
    check_eq(shown, drawn, "figures in docs/benchmarks.md vs figures plot.py draws")
    for name in shown:
        check(os.path.exists(os.path.join(SOURCE_ROOT, "docs/img", name)), f"docs/img/{name} committed")
