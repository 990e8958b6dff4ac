"""Announcing VIPs (lib/announce) on the real daemon, each ferryd in a network namespace of its
own: routes of protocol 70 that an earlier ferryd left cleared at start, from every table (other
protocols left alone); every routable VIP published as VIP/32 (/128) dev lo
scope host in the table, loopback ones never; `announce`, `ferryctl announce` (text and --json),
`status` and the ferry_announce_* metrics; a VIP withdrawn while a service on it (of two sharing
it) has fewer than min_backends healthy backends, announced again when they pass; a checked
backend's VIP held back until a first check passes; draining every backend with ferryctl and
enabling one; reloads moving the table and turning announce off and on; a route deleted behind
ferryd's back restored by its timer; SIGTERM withdrawing first and serving on for
withdraw_grace_ms, a second SIGTERM cutting that short; SIGKILL leaving the routes for
`ferryd --withdraw`, which clears every table whatever the file says; a TCP service that cannot
listen keeping its VIP withdrawn; the
config errors of --check-config (exit 78, FILE:LINE:COL)."""
import json
import signal
import subprocess
import time

from announce_lab import (FAST_HEALTH, SETTLE_S, TABLE, Lab, announce_config,
                          announce_report, echo_service, failed_checks, metric,
                          proxy_service, vips_of, wait_log)
from harness import FERRYD, base_config, check, check_eq, ferryctl_out, ok, running, wait_until


def test_stale_routes_cleared_and_routable_vips_announced_at_start(workdir):
    with Lab("ann-start", ["10.0.0.10", "10.0.0.20", "2001:db8::10"]) as lab:
        lab.add_route("10.99.0.1/32", TABLE)           # an earlier ferryd's, to be cleared
        lab.add_route("2001:db8::99/128", TABLE)       # as is its IPv6 one
        lab.add_route("10.99.0.2/32", 200)             # another table: ferry's protocol is its own
        lab.add_route("10.99.0.3/32", TABLE, "static")  # another protocol: left alone
        services = [echo_service("echo", "10.0.0.10"),
                    # No health checks: usable from the start, the backend need not even exist.
                    proxy_service("web", "10.0.0.20", 80, ["127.0.0.1:20001"]),
                    echo_service("echo6", "2001:db8::10"),
                    echo_service("local", "127.0.0.1")]
        with running(workdir, announce_config(workdir, services), netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.10", "10.0.0.20", "2001:db8::10"})
            check_eq(lab.routes().get("200"), None, "table 200 (ferry's routes go from every table)")
            check_eq(lab.routes(proto=("static",)).get(str(TABLE)), {"10.99.0.3"},
                     "the static route in table 100")
            check("removed 3 route(s) of protocol ferry that an earlier ferryd left" in d.log(),
                  f"no stale-route notice in the log:\n{d.log()}")
            # The shape a routing daemon learns: a host route through lo.
            v4 = json.loads(lab.ns.ip("-j", "-d", "route", "show", "table", str(TABLE), "10.0.0.10").stdout)
            check_eq([(r["type"], r["dev"], r["scope"], r["protocol"]) for r in v4],
                     [("unicast", "lo", "host", "70")], "the route to 10.0.0.10")
            v6 = json.loads(lab.ns.ip("-6", "-j", "route", "show", "table", str(TABLE)).stdout)
            check_eq([(r["dst"], r["dev"]) for r in v6], [("2001:db8::10", "lo")], "the IPv6 route")

            report = announce_report(d)
            check_eq((report["table"], report["protocol"], report["min_backends"], report["withdrawn"]),
                     (TABLE, 70, 1, False), "announce header")
            vips = vips_of(report)
            check_eq(sorted(vips), ["10.0.0.10", "10.0.0.20", "127.0.0.1", "2001:db8::10"], "VIPs")
            check_eq(vips["10.0.0.20"]["announced"], True, "10.0.0.20 announced")
            check_eq(vips["10.0.0.20"]["services"], ["web"], "services of 10.0.0.20")
            check_eq(vips["10.0.0.20"]["reason"], "every service on it can serve (web)", "reason")
            check_eq(vips["10.0.0.20"]["error"], None, "error")
            check_eq(vips["127.0.0.1"]["announced"], False, "loopback VIP announced")
            check_eq(vips["127.0.0.1"]["reason"],
                     "a loopback, unspecified, link-local or multicast address is never announced", "reason")
            check(vips["10.0.0.10"]["since"].endswith("Z"), f"since: {vips['10.0.0.10']}")
            check_eq(ok(d.request("status"), "status")["announce"], report, "status's announce")

            text = ferryctl_out(d, "announce")
            lines = text.splitlines()
            check_eq(lines[0], "table 100 (protocol 70), min_backends 1", "ferryctl announce header")
            check_eq(lines[1].split(), ["VIP", "ANNOUNCED", "SINCE", "SERVICES", "REASON"], "columns")
            rows = {l.split()[0]: l.split() for l in lines[2:]}
            check_eq(rows["10.0.0.20"][1], "yes", "ferryctl row of 10.0.0.20")
            check_eq(rows["10.0.0.20"][3], "web", "services column")
            check(rows["10.0.0.20"][4:] == "every service on it can serve (web)".split(), f"{text}")
            check_eq(rows["127.0.0.1"][1], "no", "ferryctl row of 127.0.0.1")
            as_json = json.loads(ferryctl_out(d, "--json", "announce"))
            check_eq(as_json["result"]["table"], TABLE, "ferryctl --json announce")
            check_eq(vips_of(as_json["result"])["2001:db8::10"]["announced"], True, "--json VIP")

            m = lab.metrics(d)
            check_eq(metric(m, "ferry_announce_vip_announced", vip="10.0.0.10"), 1.0, "announced gauge")
            check_eq(metric(m, "ferry_announce_vip_announced", vip="2001:db8::10"), 1.0, "v6 gauge")
            check_eq(metric(m, "ferry_announce_vip_announced", vip="127.0.0.1"), None, "loopback gauge")
            check_eq(metric(m, "ferry_announce_route_changes_total", change="add"), 3.0, "adds")
            check_eq(metric(m, "ferry_announce_route_changes_total", change="remove"), 0.0, "removes")
            check_eq(metric(m, "ferry_announce_route_changes_total", change="restore"), 0.0, "restores")
            check_eq(metric(m, "ferry_announce_route_errors_total"), 0.0, "errors")
        # A clean stop withdraws what it announced, nothing else.
        check_eq(lab.table(), set(), "table 100 after the stop")
        check_eq(lab.routes(), {}, "ferry's routes after the stop")


def test_a_failing_service_withdraws_the_vip_it_shares_until_min_backends_pass_again(workdir):
    with Lab("ann-health", ["10.0.0.30", "10.0.0.40"]) as lab:
        web = [lab.backend(21001), lab.backend(21002)]
        api = [lab.backend(21003), lab.backend(21004)]
        services = [proxy_service("web", "10.0.0.30", 80, [b.endpoint for b in web], FAST_HEALTH),
                    proxy_service("api", "10.0.0.30", 81, [b.endpoint for b in api], FAST_HEALTH),
                    echo_service("echo", "10.0.0.40")]
        with running(workdir, announce_config(workdir, services, min_backends=2), netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.30", "10.0.0.40"})
            check_eq(vips_of(announce_report(d))["10.0.0.30"]["reason"],
                     "every service on it can serve (web, api)", "reason while announced")
            check_eq(lab.echo("10.0.0.30", 81, "via api"), "via api", "api through ferry")

            api[0].stop()  # api: 1 of 2, min_backends 2 -> the whole VIP goes, web's port too
            lab.wait_table({"10.0.0.40"}, what="10.0.0.30 withdrawn when api lost a backend")
            vip = vips_of(announce_report(d))["10.0.0.30"]
            check_eq(vip["announced"], False, "announced")
            check_eq(vip["services"], ["web", "api"], "services")
            check_eq(vip["reason"], "api: 1 of 2 backends usable, 2 needed (1 down)", "reason")
            m = lab.metrics(d)
            check_eq(metric(m, "ferry_announce_vip_announced", vip="10.0.0.30"), 0.0, "gauge")
            check_eq(metric(m, "ferry_announce_vip_announced", vip="10.0.0.40"), 1.0, "echo gauge")
            check_eq(metric(m, "ferry_announce_route_changes_total", change="remove"), 1.0, "removes")
            check("10.0.0.30 withdrawn from table 100: api: 1 of 2 backends usable" in d.log(),
                  "no withdrawal in the log")

            api[0].start()
            lab.wait_table({"10.0.0.30", "10.0.0.40"}, what="10.0.0.30 back once api passes")
            check_eq(vips_of(announce_report(d))["10.0.0.30"]["reason"],
                     "every service on it can serve (web, api)", "reason")
            m = lab.metrics(d)
            check_eq(metric(m, "ferry_announce_route_changes_total", change="add"), 3.0, "adds")

            web[1].stop()
            lab.wait_table({"10.0.0.40"}, what="10.0.0.30 withdrawn when web lost a backend")
            check_eq(vips_of(announce_report(d))["10.0.0.30"]["reason"],
                     "web: 1 of 2 backends usable, 2 needed (1 down)", "reason")


def test_a_checked_backend_announces_its_vip_only_after_a_first_passing_check(workdir):
    # The backend does not listen at first: its checks fail, but fall 100 keeps it "up" (the
    # initial state) for 100 s, so only the missing first pass holds the VIP back.
    health = {"interval_ms": 1000, "timeout_ms": 200, "rise": 1, "fall": 100}
    with Lab("ann-first", ["10.0.0.50", "10.0.0.60"]) as lab:
        backend = lab.backend(22001, start=False)
        services = [proxy_service("web", "10.0.0.50", 80, [backend.endpoint], health),
                    proxy_service("plain", "10.0.0.60", 80, ["127.0.0.1:22002"])]
        with running(workdir, announce_config(workdir, services), netns=lab.ns.name) as d:
            # The unchecked service's VIP goes in at once; the checked one waits.
            lab.wait_table({"10.0.0.60"})
            vip = wait_until(lambda: vips_of(announce_report(d)).get("10.0.0.50"), SETTLE_S,
                             "10.0.0.50 in the announce report")
            check_eq(vip["announced"], False, "10.0.0.50 announced before a passing check")
            check_eq(vip["reason"],
                     "web: 0 of 1 backends usable, 1 needed (1 without a passing check yet)",
                     "reason")
            # Checks have failed and the backend is still up, yet the VIP stays out.
            wait_until(lambda: failed_checks(lab.metrics(d), "web") >= 2, SETTLE_S,
                       "two failed checks of web's backend")
            check_eq(lab.table(), {"10.0.0.60"}, "table after failed checks, before a pass")
            check_eq(metric(lab.metrics(d), "ferry_backend_up", service="web",
                            backend=backend.endpoint), 1.0, "web's backend up")
            check_eq(vips_of(announce_report(d))["10.0.0.50"]["announced"], False, "announced")
            backend.start()
            lab.wait_table({"10.0.0.50", "10.0.0.60"}, timeout=SETTLE_S + 2,
                           what="10.0.0.50 announced after its first passing check")
            check_eq(vips_of(announce_report(d))["10.0.0.50"]["reason"],
                     "every service on it can serve (web)", "reason")


def test_draining_every_backend_withdraws_and_enabling_one_announces(workdir):
    with Lab("ann-drain", ["10.0.0.70"]) as lab:
        b1, b2 = "127.0.0.1:23001", "127.0.0.1:23002"
        with running(workdir, announce_config(workdir, [proxy_service("web", "10.0.0.70", 80, [b1, b2])]),
                     netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.70"})
            ferryctl_out(d, "backend", "web", b1, "drain")
            check_eq(lab.table(), {"10.0.0.70"}, "table with one backend drained")
            ferryctl_out(d, "backend", "web", b2, "disable")
            lab.wait_table(set(), what="10.0.0.70 withdrawn with every backend drained")
            check_eq(vips_of(announce_report(d))["10.0.0.70"]["reason"],
                     "web: 0 of 2 backends usable, 1 needed (2 drained, disabled or weight 0)",
                     "reason")
            ferryctl_out(d, "backend", "web", b2, "enable")
            lab.wait_table({"10.0.0.70"}, what="10.0.0.70 back with one backend enabled")
            ferryctl_out(d, "backend", "web", b2, "weight", "0")
            lab.wait_table(set(), what="10.0.0.70 withdrawn at weight 0")
            # b1 is still draining: a weight does not enable it; b2's weight brings the VIP back.
            ferryctl_out(d, "backend", "web", b1, "weight", "3")
            check_eq(vips_of(announce_report(d))["10.0.0.70"]["announced"], False,
                     "announced with b1 draining at weight 3 and b2 at weight 0")
            ferryctl_out(d, "backend", "web", b2, "weight", "3")
            lab.wait_table({"10.0.0.70"}, what="10.0.0.70 back at weight 3")


def test_reloads_move_the_table_and_turn_announcing_off_and_on(workdir):
    with Lab("ann-reload", ["10.0.0.80", "10.0.0.90"]) as lab:
        both = [echo_service("a", "10.0.0.80"), echo_service("b", "10.0.0.90")]
        path = workdir.write_config(announce_config(workdir, both))
        with running(workdir, path, netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.80", "10.0.0.90"})
            # A rejected reload changes nothing.
            workdir.write_config('{"announce": {"table": 255}}')
            r = d.request("reload")
            check(not r.get("ok"), f"a reload to table 255 was accepted: {r}")
            check_eq(lab.routes(), {"100": {"10.0.0.80", "10.0.0.90"}}, "routes after a rejected reload")
            # Table 200, and service b (with its VIP) gone.
            workdir.write_config(announce_config(workdir, both[:1], table=200))
            ok(d.request("reload"), "reload to table 200")
            lab.wait_table({"10.0.0.80"}, table=200)
            lab.wait_table(set(), table=TABLE, what="table 100 emptied by the move")
            report = announce_report(d)
            check_eq(report["table"], 200, "table in the report")
            check_eq(sorted(vips_of(report)), ["10.0.0.80"], "VIPs after b went")
            check("moving the VIP routes from table 100 to table 200" in d.log(), "no move notice")
            # No announce section: everything withdrawn, the command says off.
            cfg = announce_config(workdir, both)
            del cfg["announce"]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload without announce")
            wait_until(lambda: lab.routes() == {}, SETTLE_S, "every route of protocol ferry gone")
            check_eq(announce_report(d), {"enabled": False}, "announce when off")
            check_eq(ok(d.request("status"), "status")["announce"], None, "status's announce when off")
            check_eq(ferryctl_out(d, "announce"), "announce is off (no announce section in the config)\n",
                     "ferryctl announce when off")
            # And on again.
            workdir.write_config(announce_config(workdir, both))
            ok(d.request("reload"), "reload with announce again")
            lab.wait_table({"10.0.0.80", "10.0.0.90"})


def test_a_route_removed_behind_ferryds_back_is_restored(workdir):
    with Lab("ann-restore", ["10.0.0.100", "10.0.0.101"]) as lab:
        services = [echo_service("a", "10.0.0.100"), echo_service("b", "10.0.0.101")]
        with running(workdir, announce_config(workdir, services), netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.100", "10.0.0.101"})
            lab.del_route("10.0.0.100/32", TABLE)
            check_eq(lab.table(), {"10.0.0.101"}, "table after the deletion")
            lab.wait_table({"10.0.0.100", "10.0.0.101"}, timeout=7.5,
                           what="the deleted route restored by the 5 s timer")
            check("the route to 10.0.0.100 had been removed from table 100 by someone else" in d.log(),
                  "no restore warning in the log")
            m = lab.metrics(d)
            check_eq(metric(m, "ferry_announce_route_changes_total", change="restore"), 1.0, "restores")
            check_eq(metric(m, "ferry_announce_route_changes_total", change="add"), 2.0, "adds")
            check_eq(metric(m, "ferry_announce_route_errors_total"), 0.0, "errors")


def test_sigterm_withdraws_first_and_serves_through_the_grace(workdir):
    grace_ms = 3000
    with Lab("ann-grace", ["10.0.0.110"]) as lab:
        cfg = announce_config(workdir, [echo_service("echo", "10.0.0.110")], withdraw_grace_ms=grace_ms)
        with running(workdir, cfg, netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.110"})
            check_eq(lab.echo("10.0.0.110", 7, "before"), "before", "echo before the stop")
            signalled = time.monotonic()
            d.signal(signal.SIGTERM)
            lab.wait_table(set(), timeout=2.0, what="withdrawal right after SIGTERM")
            check(d.proc.poll() is None, "ferryd exited before its grace")
            check_eq(lab.echo("10.0.0.110", 7, "during the grace"), "during the grace",
                     "echo during the grace")
            # The control socket serves on too, and says why the VIP is out.
            report = announce_report(d)
            check_eq(report["withdrawn"], True, "withdrawn during the grace")
            check_eq([(v["vip"], v["announced"], v["reason"]) for v in report["vips"]],
                     [("10.0.0.110", False, "ferryd is stopping")], "VIPs during the grace")
            check_eq(ferryctl_out(d, "announce").splitlines()[0],
                     "table 100 (protocol 70), min_backends 1, all withdrawn: stopping",
                     "ferryctl announce during the grace")
            check(d.proc.poll() is None, "ferryd exited before its grace")
            # Not d.stop(): its SIGTERM would be a second one, which cuts the grace.
            d.returncode = d.proc.wait(timeout=grace_ms / 1000 + 10)
            took = time.monotonic() - signalled
            check_eq(d.returncode, 0, "exit code")
            check(took >= grace_ms / 1000 - 0.3, f"ferryd stopped {took:.2f}s after SIGTERM, "
                  f"before its {grace_ms} ms grace")
            check("announce: 1 VIP(s) withdrawn; serving on for 3000 ms" in d.log(), "no grace notice")
            statuses = []
            try:
                while True:
                    statuses.append(d.notify.wait_for("STATUS", timeout=0.2, fresh=True)["STATUS"])
            except Exception:
                pass
            statuses += [f["STATUS"] for f in d.notify.messages if "STATUS" in f]
            check("stopping: VIPs withdrawn, serving on for 3000 ms" in statuses,
                  f"no STATUS= for the grace: {statuses}")


def test_a_second_sigterm_cuts_the_grace_short(workdir):
    with Lab("ann-cut", ["10.0.0.120"]) as lab:
        cfg = announce_config(workdir, [echo_service("echo", "10.0.0.120")], withdraw_grace_ms=60000)
        with running(workdir, cfg, netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.120"})
            d.signal(signal.SIGTERM)
            lab.wait_table(set(), timeout=2.0, what="withdrawal right after SIGTERM")
            wait_log(d, "serving on for 60000 ms")
            check(d.proc.poll() is None, "ferryd exited before its grace")
            stop_promptly(d, "after the second SIGTERM")
            check("received a second stop signal; stopping without waiting out the grace" in d.log(),
                  "no notice of the cut")


def test_a_stop_with_nothing_announced_does_not_wait_out_the_grace(workdir):
    with Lab("ann-nograce", ["10.0.0.140"]) as lab:
        # Its only backend is checked and never answers: never usable.
        cfg = announce_config(workdir, [proxy_service("web", "10.0.0.140", 80, ["127.0.0.1:24001"],
                                                      FAST_HEALTH)],
                              withdraw_grace_ms=60000)
        with running(workdir, cfg, netns=lab.ns.name) as d:
            vip = wait_until(lambda: vips_of(announce_report(d)).get("10.0.0.140"), SETTLE_S,
                             "10.0.0.140 in the announce report")
            check_eq(vip["announced"], False, "a VIP whose only backend never passes a check")
            stop_promptly(d, "with nothing to withdraw")
            check("serving on for" not in d.log(), "a grace with nothing withdrawn")


def stop_promptly(d, what):
    """SIGTERM, and ferryd exits 0 within 5 s (no grace waited out)."""
    started = time.monotonic()
    d.signal(signal.SIGTERM)
    d.returncode = d.proc.wait(timeout=10)
    check_eq(d.returncode, 0, "exit code")
    took = time.monotonic() - started
    check(took < 5, f"ferryd took {took:.2f}s to stop {what}")


def test_a_tcp_service_that_cannot_listen_keeps_its_vip_withdrawn(workdir):
    with Lab("ann-bind", ["10.0.0.140"]) as lab:
        first = [echo_service("a", "10.0.0.140")]
        path = workdir.write_config(announce_config(workdir, first))
        with running(workdir, path, netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.140"})
            # 10.0.0.150 is not on lo: the reload stands, but service b cannot listen.
            workdir.write_config(announce_config(workdir, first + [echo_service("b", "10.0.0.150")]))
            ok(d.request("reload"), "reload adding b")
            vip = vips_of(announce_report(d))["10.0.0.150"]
            check_eq((vip["announced"], vip["reason"]),
                     (False, "b: not listening on 10.0.0.150:7 (see the log)"), "b's VIP")
            check_eq(lab.table(), {"10.0.0.140"}, "routes while b cannot listen")
            # The address arrives; the next reload binds, and the VIP goes in.
            lab.ns.ip("addr", "add", "10.0.0.150/32", "dev", "lo")
            ok(d.request("reload"), "reload once the address is there")
            lab.wait_table({"10.0.0.140", "10.0.0.150"})


def test_sigkill_leaves_the_routes_for_ferryd_withdraw(workdir):
    with Lab("ann-kill", ["10.0.0.130", "2001:db8::130"]) as lab:
        lab.add_route("10.99.0.2/32", 200, "static")  # not ferry's: --withdraw leaves it
        services = [echo_service("a", "10.0.0.130"), echo_service("b", "2001:db8::130")]
        path = workdir.write_config(announce_config(workdir, services))
        with running(workdir, path, netns=lab.ns.name) as d:
            lab.wait_table({"10.0.0.130", "2001:db8::130"})
            d.kill()
            check_eq(d.returncode, -signal.SIGKILL, "killed")
            check_eq(lab.table(), {"10.0.0.130", "2001:db8::130"}, "routes left by SIGKILL")
        r = lab.ferryd_withdraw(path)
        check_eq(r.returncode, 0, f"ferryd --withdraw exit code ({r.stderr})")
        check_eq(r.stdout, "ferryd: withdrew 2 route(s) of protocol ferry\n", "stdout")
        check_eq(lab.routes(), {}, "ferry's routes after --withdraw")
        check_eq(lab.routes(proto=("static",)), {"200": {"10.99.0.2"}}, "the static route")
        r = lab.ferryd_withdraw(path)
        check_eq((r.returncode, r.stdout),
                 (0, "ferryd: withdrew 0 route(s) of protocol ferry\n"), "second run")
        # Killed again, and started again instead: the new ferryd clears what the old one left.
        with running(workdir, path, netns=lab.ns.name, name="second") as d:
            lab.wait_table({"10.0.0.130", "2001:db8::130"})
            d.kill()
        with running(workdir, path, netns=lab.ns.name, name="third") as d:
            lab.wait_table({"10.0.0.130", "2001:db8::130"})
            check("removed 2 route(s) of protocol ferry that an earlier ferryd left" in d.log(),
                  f"no stale-route notice:\n{d.log()}")
        check_eq(lab.routes(), {}, "ferry's routes after the third ferryd stopped")
        # Without CAP_NET_ADMIN the routes stay and --withdraw says so, exit 1.
        lab.add_route("10.99.0.1/32", TABLE)
        r = lab.ns.run("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                       FERRYD, "--withdraw", "--config", workdir.file("missing.json"), check=False)
        check_eq(r.returncode, 1, f"--withdraw without privileges ({r.stdout} {r.stderr})")
        check("ferryd: withdrawing the announced routes failed: removing the route to "
              in r.stderr and "Operation not permitted" in r.stderr, f"stderr: {r.stderr}")
        check("10.99.0.1" in lab.table(), "the route a failed --withdraw could not remove")


def test_ferryd_withdraw_clears_every_table_whatever_the_file_says(workdir):
    with Lab("ann-wdraw") as lab:
        def plant():
            lab.add_route("10.99.0.1/32", 100)
            lab.add_route("10.99.0.2/32", 200)
            lab.add_route("2001:db8::3/128", 300)
        lab.add_route("10.99.0.9/32", 100, "static")
        invalid = workdir.write_config('{"announce": {"table": 100}, oops', "invalid.json")
        no_announce = workdir.write_config(base_config(workdir), "plain.json")
        missing = workdir.file("missing.json")
        other_table = workdir.write_config(base_config(workdir, announce={"table": 500}), "other.json")
        for path, what in ((invalid, "an invalid file"), (no_announce, "a file without announce"),
                           (missing, "a missing file"), (other_table, "a file naming another table")):
            plant()
            r = lab.ferryd_withdraw(path)
            check_eq(r.returncode, 0, f"--withdraw with {what} ({r.stderr})")
            check_eq(r.stdout, "ferryd: withdrew 3 route(s) of protocol ferry\n", f"stdout with {what}")
            check_eq(lab.routes(), {}, f"routes of protocol ferry after --withdraw with {what}")
            if path in (invalid, missing):
                check("(withdrawing anyway)" in r.stderr, f"stderr: {r.stderr}")
        check_eq(lab.routes(proto=("static",)), {"100": {"10.99.0.9"}}, "the static route")


def test_check_config_refuses_bad_announce_sections(workdir):
    text = ('{\n  "services": [{"name": "web", "vip": "10.0.0.10", "port": 80, "protocols": ["tcp"],\n'
            '                "backends": ["127.0.0.1:1", "127.0.0.1:2"]}],\n'
            '  "announce": {"table": 100, "min_backends": 3}\n}\n')
    cases = [
        (text, 4, text.splitlines()[3].index("3}") + 1,
         "announce.min_backends: 3 is more than service 'web' has backends of weight above 0 (2): its VIP "
         "10.0.0.10 would never be announced"),
        ('{"announce": {"table": 254}}', 1, 24, "announce.table: 254 is the kernel's main table; "
                                                "use a table of ferry's own (e.g. 100) that the "
                                                "routing daemon learns from"),
        ('{"announce": {"table": 0}}', 1, 24, "announce.table: 0 is out of range (1..4294967295)"),
    ]
    for i, (config_text, line, column, message) in enumerate(cases):
        path = workdir.write_config(config_text, f"bad{i}.json")
        r = subprocess.run([FERRYD, "--check-config", "--config", path], capture_output=True,
                           text=True, timeout=20)
        check_eq(r.returncode, 78, f"--check-config exit code for {config_text!r}")
        check_eq(r.stderr.strip().splitlines()[-1], f"{path}:{line}:{column}: {message}", "stderr")
    ok_path = workdir.write_config('{"announce": {"table": 4000, "min_backends": 2, "withdraw_grace_ms": 0},'
                                   ' "services": []}', "good.json")
    r = subprocess.run([FERRYD, "--check-config", "--config", ok_path], capture_output=True,
                       text=True, timeout=20)
    check_eq(r.returncode, 0, f"--check-config of a good announce section ({r.stderr})")
