"""The Debian package: packaging/build-deb.sh turns this checkout into a .deb with
dpkg-buildpackage; the .deb unpacked into a scratch root holds the programs, the conffile, the
unit, completion, man pages and docs; its maintainer script creates the ferry group and user;
the unpacked programs run; lintian reports no errors (its warnings are printed)."""
import os
import re
import subprocess

import deb as deb_cache
from harness import SOURCE_ROOT, check, check_eq

# A cold build measured 7.5 min of CPU and 28 min of wall time on this 2-core machine shared with
# five other builds; ccache (see build-deb.sh) skips the files that did not change since.
BUILD_BUDGET_S = 1700

EXPECTED_FILES = [
    "usr/sbin/ferryd",
    "usr/bin/ferryctl",
    "usr/sbin/ferry-decap",
    "etc/ferry/ferryd.json",
    "etc/iproute2/rt_protos.d/ferry.conf",
    "lib/systemd/system/ferryd.service",
    "usr/share/bash-completion/completions/ferryctl",
    "usr/share/man/man8/ferryd.8.gz",
    "usr/share/man/man8/ferryctl.8.gz",
    "usr/share/man/man8/ferry-decap.8.gz",
    "usr/share/man/man5/ferryd.json.5.gz",
    "usr/share/doc/ferry/README.md",
    "usr/share/doc/ferry/operations.md",
    "usr/share/doc/ferry/config.md",
    "usr/share/doc/ferry/metrics.md",
    "usr/share/doc/ferry/fleet.md",
    "usr/share/doc/ferry/dsr.md",
    "usr/share/doc/ferry/copyright",
    "usr/share/doc/ferry/changelog.gz",
]


def changelog_version():
    return subprocess.run(["dpkg-parsechangelog", "-l",
                           os.path.join(SOURCE_ROOT, "packaging", "debian", "changelog"), "-S",
                           "Version"], capture_output=True, text=True, check=True).stdout.strip()


def build_package():
    """The .deb of this tree from packaging/build-deb.sh, through deb.py's cache (which
    test_systemd_boot then installs without building it again)."""
    path, seconds = deb_cache.package(BUILD_BUDGET_S)
    if seconds is None:
        print(f"  package of this tree already built (cache {os.path.dirname(path)}): "
              f"{os.path.basename(path)}", flush=True)
    else:
        print(f"  package built in {seconds:.0f} s: {os.path.basename(path)}", flush=True)
    return path


def test_package_builds_installs_the_right_files_and_passes_lintian(workdir):
    deb = build_package()
    check_eq(os.path.basename(deb), f"ferry_{changelog_version()}_amd64.deb", "package file name")

    root = workdir.file("root")
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    for path in EXPECTED_FILES:
        check(os.path.isfile(os.path.join(root, path)), f"{path} is in the package")
    for path, mode in (("usr/sbin/ferryd", 0o755), ("usr/bin/ferryctl", 0o755),
                       ("usr/sbin/ferry-decap", 0o755),
                       ("etc/ferry/ferryd.json", 0o644),
                       ("etc/iproute2/rt_protos.d/ferry.conf", 0o644)):
        check_eq(oct(os.stat(os.path.join(root, path)).st_mode & 0o7777), oct(mode), f"mode of {path}")
    for shipped, source in (("etc/ferry/ferryd.json", "etc/ferry/ferryd.json"),
                            ("etc/iproute2/rt_protos.d/ferry.conf",
                             "etc/iproute2/rt_protos.d/ferry.conf"),
                            ("lib/systemd/system/ferryd.service", "systemd/ferryd.service")):
        with open(os.path.join(root, shipped)) as a, open(os.path.join(SOURCE_ROOT, source)) as b:
            check(a.read() == b.read(), f"{shipped} is {source}")

    control = workdir.file("control")
    subprocess.run(["dpkg-deb", "-e", deb, control], check=True)
    with open(os.path.join(control, "conffiles")) as f:
        check_eq(f.read().split(), ["/etc/ferry/ferryd.json", "/etc/iproute2/rt_protos.d/ferry.conf"],
                 "conffiles")
    with open(os.path.join(control, "postinst")) as f:
        postinst = f.read()
    check(re.search(r"addgroup .*--system ferry", postinst), "postinst creates the ferry group")
    check(re.search(r"adduser .*--system .*--ingroup ferry", postinst), "postinst creates the ferry user")
    check("deb-systemd-helper" in postinst, "postinst enables the unit (dh_installsystemd)")
    fields = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Depends"], capture_output=True,
                            text=True, check=True).stdout
    check("adduser" in fields and "libbpf1" in fields and "libxdp1" in fields, f"Depends: {fields}")

    # The unpacked programs run and accept the shipped configuration.
    ferryd = os.path.join(root, "usr/sbin/ferryd")
    r = subprocess.run([ferryd, "--version"], capture_output=True, text=True, timeout=10)
    check_eq(r.stdout.strip(), f"ferryd {changelog_version()}", "ferryd --version")
    r = subprocess.run([ferryd, "--check-config", "--config", os.path.join(root, "etc/ferry/ferryd.json")],
                       capture_output=True, text=True, timeout=10)
    check_eq(r.returncode, 0, f"shipped config is valid: {r.stderr}")
    r = subprocess.run([os.path.join(root, "usr/bin/ferryctl"), "--version"], capture_output=True,
                       text=True, timeout=10)
    check_eq(r.returncode, 0, f"ferryctl --version: {r.stderr}")
    r = subprocess.run([os.path.join(root, "usr/sbin/ferry-decap"), "--version"], capture_output=True,
                       text=True, timeout=10)
    check_eq(r.stdout.strip(), f"ferry-decap {changelog_version()}", "ferry-decap --version")
    for page in ("man8/ferryd.8.gz", "man8/ferryctl.8.gz", "man8/ferry-decap.8.gz",
                 "man5/ferryd.json.5.gz"):
        r = subprocess.run(["man", "--warnings", "-l", os.path.join(root, "usr/share/man", page)],
                           capture_output=True, text=True, timeout=30, env=dict(os.environ, MANWIDTH="80"))
        check_eq(r.stderr, "", f"man --warnings {page}")
        check(len(r.stdout) > 1000, f"{page} renders")

    r = subprocess.run(["lintian", "--no-tag-display-limit", "--display-info", deb],
                       capture_output=True, text=True, timeout=600)
    tags = [l for l in r.stdout.splitlines() if re.match(r"^[EWIX]: ", l)]
    errors = [l for l in tags if l.startswith("E: ")]
    for line in tags:
        print(f"  lintian {line}")
    check(not errors, f"lintian errors: {errors}")
    check(r.returncode == 0, f"lintian exit status {r.returncode}: {r.stderr}")
