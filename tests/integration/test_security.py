"""Security of the real daemon beyond test_control_socket.py (which covers a non-admin uid that
cannot reload, a uid outside the socket's group, a symlink to a regular file at the socket path
and one wrong TCP token): config files others could write or own are refused with exit 78 and the
path, a symlink to a socket or to nothing at the socket path is never followed or replaced, and
repeated wrong TCP tokens block the source, counted as reason "auth"."""
import json
import os
import pwd
import socket
import subprocess

from harness import FERRYD, Daemon, base_config, check, check_eq, ok, tcp_control_config

EX_CONFIG = 78


def check_config_refused(w, path, words):
    r = subprocess.run([FERRYD, "--check-config", "--config", path], capture_output=True,
                       text=True, timeout=10)
    check_eq(r.returncode, EX_CONFIG, f"--check-config exit code ({r.stderr})")
    check(path in r.stderr and all(x in r.stderr for x in words), f"message: {r.stderr!r}")
    d = Daemon(w, path, name=f"refused-{len(os.listdir(w.path))}")
    try:
        check_eq(d.proc.wait(timeout=15), EX_CONFIG, "ferryd exit code")
        log = d.log()
        check(path in log and all(x in log for x in words), f"daemon message: {log!r}")
    finally:
        d.cleanup()


def test_config_writable_by_group_or_others_is_refused(workdir):
    for mode, words in ((0o664, ["writable by its group"]), (0o646, ["writable by others"])):
        path = workdir.write_config(base_config(workdir), name=f"cfg-{mode:o}.json", mode=mode)
        check_config_refused(workdir, path, words)
    path = workdir.write_config(base_config(workdir), name="cfg-ok.json", mode=0o644)
    r = subprocess.run([FERRYD, "--check-config", "--config", path], capture_output=True,
                       text=True, timeout=10)
    check_eq(r.returncode, 0, f"the same config with mode 0644 is accepted ({r.stderr})")


def test_config_owned_by_another_user_is_refused(workdir):
    nobody = pwd.getpwnam("nobody")
    path = workdir.write_config(base_config(workdir), name="cfg-nobody.json", mode=0o644)
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    check_config_refused(workdir, path, [f"owned by uid {nobody.pw_uid}"])


def test_reload_of_a_config_made_group_writable_is_refused_and_keeps_running(workdir, ferryd):
    cfg = base_config(workdir)
    d = ferryd(cfg)
    path = d.config_path
    os.chmod(path, 0o664)
    r = d.request("reload")
    check_eq(r["ok"], False, f"reload of a group-writable file refused: {r}")
    check(path in json.dumps(r) and "group" in json.dumps(r), f"error names the file: {r}")
    st = ok(d.request("status"))
    check_eq((st["state"], st["reloads"]), ("running", 0), "old config still serving")


def test_symlink_to_a_socket_or_to_nothing_at_socket_path_is_not_followed(workdir):
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # A live socket of someone else's and a dangling name: unlinking "a stale socket" or
        # binding through the link would replace or create them.
        other_path = workdir.file("someone-elses.sock")
        other.bind(other_path)
        other.listen(1)
        for name, target in (("live", other_path), ("dangling", workdir.file("nothing-here"))):
            cfg = base_config(workdir, control={"socket": workdir.file(f"{name}/ferryd.sock"), "mode": "0660",
                                                "group": None})
            sock_path = cfg["control"]["socket"]
            os.makedirs(os.path.dirname(sock_path), mode=0o750)
            os.symlink(target, sock_path)
            d = Daemon(workdir, workdir.write_config(cfg, name=f"{name}.json"), name=f"ferryd-{name}")
            try:
                check_eq(d.proc.wait(timeout=15), 1, f"{name}: exit code")
                check(os.path.islink(sock_path) and os.readlink(sock_path) == target,
                      f"{name}: symlink untouched")
                check(sock_path in d.log(), f"{name}: error names the path: {d.log()!r}")
            finally:
                d.cleanup()
        check(os.path.exists(other_path), "the other socket still exists")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(other_path)  # still bound to its owner
        check(not os.path.lexists(workdir.file("nothing-here")), "nothing created through the link")
    finally:
        other.close()


def test_repeated_wrong_tokens_block_the_source_and_are_counted(workdir, ferryd):
    cfg = tcp_control_config(workdir, "right-token-0123456789")
    d = ferryd(cfg)
    host, port = ok(d.request("status"))["control"]["tcp"].rsplit(":", 1)

    def attempt(secret):
        """The answers to an auth line and a status request (empty: closed unanswered)."""
        answers = []
        with socket.create_connection((host, int(port)), timeout=10) as s:
            f = s.makefile("rwb")
            try:
                f.write(json.dumps({"auth": secret}).encode() + b'\n{"id":1,"cmd":"status"}\n')
                f.flush()
                while len(answers) < 2:
                    line = f.readline()
                    if not line:
                        break
                    answers.append(json.loads(line))
            except (ConnectionResetError, BrokenPipeError):
                pass
        return answers

    before = attempt("right-token-0123456789")
    check_eq([a["ok"] for a in before], [True, True], f"right token before: {before}")
    wrong = [attempt(f"wrong-{i}") for i in range(20)]
    refused_with_error = sum(1 for a in wrong if a and a[0].get("ok") is False)
    cut_off = sum(1 for a in wrong if not a)
    check(all(len(a) <= 1 for a in wrong), f"no wrong token got a status answer: {wrong}")
    check(cut_off >= 10, f"later attempts are cut off unanswered ({refused_with_error} "
                         f"answered with an error, {cut_off} cut off)")
    # While blocked even the right token is refused: a guesser cannot tell a hit.
    blocked = attempt("right-token-0123456789")
    check(not any(a.get("result", {}).get("pid") for a in blocked),
          f"right token while blocked gets no status: {blocked}")
    counters = ok(d.request("stats", {"prefix": "ferry_control_rejected"}))["metrics"][0]
    auth = sum(s["value"] for s in counters["samples"] if s["labels"]["reason"] == "auth")
    check_eq(auth, 21, "every wrong or blocked attempt counted as reason auth")
    check_eq(ok(d.request("status"))["state"], "running", "unix socket unaffected")
