"""Reload through `reload` and SIGHUP: a valid file is applied, an invalid one is rejected with
FILE:LINE:COL and the running configuration stays in force."""
import signal

from harness import base_config, check, check_eq, ok, wait_until

SERVICE = {"name": "echo", "vip": "127.0.0.1", "port": 7007, "protocols": ["tcp"], "mode": "echo"}


def service_names(d):
    return [s["name"] for s in ok(d.request("services"), "services")["services"]]


def counter(d, name):
    for fam in ok(d.request("stats", {"prefix": name}), "stats")["metrics"]:
        if fam["name"] == name:
            return fam["samples"][0]["value"]
    raise AssertionError(f"{name} missing from stats")


def test_reload_command_applies_valid_config(workdir, ferryd):
    cfg = base_config(workdir)
    d = ferryd(cfg)
    check_eq(service_names(d), [], "services before reload")
    cfg["services"] = [SERVICE]
    workdir.write_config(cfg)
    result = ok(d.request("reload"), "reload")
    check_eq(result["reloaded"], True, "reload result")
    check_eq(service_names(d), ["echo"], "services after reload")
    check_eq(counter(d, "ferry_config_reloads_total"), 1, "reloads counter")
    status = ok(d.request("status"), "status")
    check_eq(status["reloads"], 1, "status.reloads")
    running_cfg = ok(d.request("config"), "config")["config"]
    check_eq(running_cfg["services"][0]["name"], "echo", "config command shows new config")


def test_reload_command_rejects_invalid_config(workdir, ferryd):
    cfg = base_config(workdir, services=[SERVICE])
    d = ferryd(cfg)
    path = workdir.write_config('{\n  "services": [\n    { "name": 7 }\n  ]\n}\n')
    resp = d.request("reload")
    check_eq(resp["ok"], False, "reload of a broken file fails")
    check_eq(resp["error"]["code"], "rejected", "error code")
    check(resp["error"]["message"].startswith(f"{path}:3:"), f"FILE:LINE:COL in {resp['error']}")
    check_eq(service_names(d), ["echo"], "old services still in force")
    status = ok(d.request("status"), "status")
    check_eq(status["reload_failures"], 1, "status.reload_failures")
    check(status["last_reload_error"].startswith(path), "status.last_reload_error")
    check_eq(counter(d, "ferry_config_reload_failures_total"), 1, "failure counter")
    check_eq(counter(d, "ferry_config_reloads_total"), 0, "reloads counter unchanged")


def test_sighup_with_broken_config_keeps_old_and_good_one_applies(workdir, ferryd):
    cfg = base_config(workdir)
    d = ferryd(cfg)
    workdir.write_config("{ this is not json")
    d.signal(signal.SIGHUP)
    wait_until(lambda: ok(d.request("status"))["reload_failures"] == 1, 10, "SIGHUP reload failure")
    check("reload rejected" in d.log(), "rejection logged")
    check_eq(ok(d.request("status"))["state"], "running", "daemon still running")
    cfg["services"] = [SERVICE]
    workdir.write_config(cfg)
    d.signal(signal.SIGHUP)
    wait_until(lambda: ok(d.request("status"))["reloads"] == 1, 10, "SIGHUP reload")
    check_eq(service_names(d), ["echo"], "services after SIGHUP")
    check_eq(ok(d.request("status"))["last_reload_error"], None, "error cleared")


def test_restart_only_keys_are_reported_not_applied(workdir, ferryd):
    cfg = base_config(workdir)
    d = ferryd(cfg)
    old_socket = cfg["control"]["socket"]
    cfg["control"]["socket"] = workdir.file("other.sock")
    workdir.write_config(cfg)
    result = ok(d.request("reload"), "reload")
    check("control.socket" in result["restart_required"], f"restart_required: {result}")
    status = ok(d.request("status"), "status")
    check_eq(status["control"]["socket"], old_socket, "running socket unchanged")
