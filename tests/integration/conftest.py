"""pytest for the integration suite: the fixtures its tests share (a work directory, ferryd,
ferryctl, metrics readers), a skip counted as a failure, and the closing `N passed, N failed` line
each file ends with (docs/testing.md)."""
import contextlib
import types

import pytest

import fastpath_lab as fastpath
import harness
from netns import xdp_attached
from proxy_peers import Metrics


@pytest.fixture
def workdir():
    """A private temp directory for the test's sockets, configs and logs (harness.Workdir),
    removed when the test ends, passed or failed."""
    w = harness.Workdir()
    try:
        yield w
    finally:
        w.cleanup()


@pytest.fixture
def ferryd(workdir):
    """Starts ferryd: `ferryd(cfg, **kwargs)` (harness.running's arguments) returns a Daemon that
    sent READY=1. Each one is stopped and checked (harness.Daemon.cleanup: exit status,
    sanitizer reports) when the test ends, in reverse order of start."""
    with contextlib.ExitStack() as started:
        yield lambda cfg, **kwargs: started.enter_context(harness.running(workdir, cfg, **kwargs))


class _Ferryctl:
    __call__ = staticmethod(harness.ferryctl)
    out = staticmethod(harness.ferryctl_out)


@pytest.fixture
def ferryctl():
    """harness.ferryctl: `ferryctl(daemon or socket path, *args, user=None, timeout=20)`, the
    CompletedProcess; `ferryctl.out(...)` its stdout, failing the test unless it exits 0."""
    return _Ferryctl()


@pytest.fixture
def metrics():
    """Readers of a running ferryd's metrics: over the `stats` command `samples(d, family)`,
    `total(d, family, **labels)` and `by_label(d, family, label)`; `scrape(d)` one scrape of
    /metrics (proxy_peers.Metrics: `value(name, **labels)`, `has(name)`)."""
    return types.SimpleNamespace(samples=harness.samples, total=harness.total,
                                 by_label=harness.by_label, scrape=Metrics)


@pytest.fixture(scope="module")
def shared_fastpath_lab():
    """One fast-path lab (fastpath_lab.Lab() as it comes: offloads on, no static neighbours) with
    its echo servers, built once for the file's tests that take `fastpath_lab`."""
    w = harness.Workdir()
    try:
        lab = fastpath.Lab()
        try:
            lab.start_echo(w)
            yield lab
        finally:
            lab.close()
    finally:
        w.cleanup()


@pytest.fixture
def fastpath_lab(shared_fastpath_lab):
    """The file's shared fast-path lab, handed to each test as a fresh one would be: no XDP program
    on the gateway's ports (every earlier ferryd is gone), the echo servers up, and the
    namespaces' neighbour caches flushed, so a test's first datagrams still meet unresolved
    neighbours (ferry's hold queue) as in a lab of its own. A test that changes the lab otherwise
    (a route, a link) undoes it itself."""
    lab = shared_fastpath_lab
    # The kernel lets go of a killed ferryd's bpf_links soon after, not at once.
    harness.wait_until(lambda: not xdp_attached(lab.gw, "g0") and not xdp_attached(lab.gw, "g1"),
                       5, "the shared fast-path lab's ports free of XDP programs")
    harness.check(lab.procs[0].poll() is None, "the shared fast-path lab's echo servers exited")
    for ns in lab.spaces:
        ns.ip("neigh", "flush", "all")
    return lab


# --- A skip is a failure; the closing line. ---

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """No test here may skip (a test that cannot run what it names fails): a skip, from
    pytest.skip, a skip mark or a fixture, is reported as a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, which fails here (no integration test may skip): {reason}"


_failed = set()
_passed = set()


def pytest_runtest_logreport(report):
    if report.failed:
        _failed.add(report.nodeid)
    elif report.when == "call" and report.passed:
        _passed.add(report.nodeid)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """The last line of each file's run, as harness.run_tests printed it before pytest: `N passed,
    N failed`, after pytest's own summary. A test counts as failed when any of its phases (fixture setup,
    the test, teardown) failed, and a file that does not import as one failed test; a run that
    collected nothing fails (a file without tests, a -k that matches none)."""
    yield
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    broken = [r for r in reporter.stats.get("error", []) if isinstance(r, pytest.CollectReport)] \
        if reporter else []
    if session.testscollected == 0 and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
    line = f"{len(_passed - _failed)} passed, {len(_failed) + len(broken)} failed"
    if reporter:
        reporter.write_line(line)
    else:
        print(line, flush=True)
