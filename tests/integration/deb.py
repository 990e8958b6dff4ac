"""The .deb of this checkout, built once per source tree: test_package checks it, test_systemd_boot
installs it. packaging/build-deb.sh builds into a cache directory named for a hash of every file it
packages, so the second test (or a rerun on an unchanged tree) reuses the first one's package."""
import fcntl
import hashlib
import os
import shutil
import subprocess
import time

from harness import SOURCE_ROOT, check_eq

BUILD_DEB = os.path.join(SOURCE_ROOT, "packaging", "build-deb.sh")
CACHE = os.environ.get("FERRY_DEB_CACHE", "/var/tmp/ferry-deb-cache")
KEEP = 3  # packages of other trees (checkouts, earlier commits) kept beside the current one


def tree_key():
    """sha256 over the path, executable bit and content of each file build-deb.sh copies: the
    ones git knows about or would add, as it lists them."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=SOURCE_ROOT, capture_output=True, check=True).stdout.split(b"\0")
    h = hashlib.sha256()
    for name in sorted(f for f in files if f):
        path = os.path.join(SOURCE_ROOT.encode(), name)
        if not os.path.isfile(path):  # deleted in the work tree: build-deb.sh skips it too
            continue
        with open(path, "rb") as f:
            content = f.read()
        h.update(b"%s\0%d\0%d\0" % (name, os.stat(path).st_mode & 0o111, len(content)))
        h.update(content)
    return h.hexdigest()[:20]


def package(timeout):
    """(path of the .deb for the tree as it is now, seconds build-deb.sh took or None when the
    cache had it). Waits for a build of the same tree another test is running."""
    os.makedirs(CACHE, exist_ok=True)
    key = tree_key()
    out = os.path.join(CACHE, key)
    with open(os.path.join(CACHE, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # ferry_VERSION_ARCH.deb; beside it, ferry-dbgsym_VERSION_ARCH.deb
        debs = [f for f in os.listdir(out) if f.startswith("ferry_") and f.endswith(".deb")] \
            if os.path.isdir(out) else []
        seconds = None
        if len(debs) != 1:
            partial = out + ".partial"
            shutil.rmtree(partial, ignore_errors=True)
            started = time.monotonic()
            try:
                r = subprocess.run([BUILD_DEB, partial], capture_output=True, text=True,
                                   timeout=timeout)
                check_eq(r.returncode, 0, f"build-deb.sh: {r.stdout[-2000:]} {r.stderr[-4000:]}")
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            seconds = time.monotonic() - started
            shutil.rmtree(out, ignore_errors=True)
            os.rename(partial, out)
            debs = [os.path.basename(r.stdout.strip().splitlines()[-1])]
        os.utime(out)  # most recently used
        others = sorted((os.path.join(CACHE, d) for d in os.listdir(CACHE) if d not in (key, "lock")),
                        key=os.path.getmtime, reverse=True)
        for old in others[KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
    return os.path.join(out, debs[0]), seconds
