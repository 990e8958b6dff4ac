"""The split of a proxy's perf profile by kind of work (proxy_bench.py --profile): what is the
proxy's own (its user space, io_uring or epoll, fget/fput, syscall glue, the scheduler) and what is
the kernel's TCP/IP work every proxy pays per message and per byte (the copies, TCP, loopback,
softirq, waking the peers). Each sample goes by its leaf symbol; kernel symbols are matched with
their leading underscores stripped, so `__x64_sys_io_uring_enter` and `____fput` land where
`io_uring_enter` and `fput` do."""
import re
import subprocess

# Kernel symbols, leading underscores stripped, first match wins; the rest is "kernel TCP/IP".
KERNEL_KINDS = [
    ("io_uring / epoll", re.compile(
        r"(io_|x64_sys_io_uring|do_sys_io_uring|tctx_|ep_|do_epoll|x64_sys_epoll)")),
    ("fget/fput", re.compile(r"(f(get|put)|fdget|sockfd_lookup)")),
    ("syscall/vfs glue", re.compile(
        r"(entry_SYSCALL|do_syscall|syscall_|x64_sys_(read|write|recv|send)|ksys_|vfs_|do_writev"
        r"|do_readv|sock_(read|write)_iter|sock_(send|recv)msg|sys_(send|recv)|import_iovec"
        r"|check_object_size|copy_msghdr)")),
    ("scheduler", re.compile(
        r"(schedule|switch_to|finish_task_switch|pick_next|(en|de)queue_(task|entity)"
        r"|update_curr|try_to_wake_up|ttwu|psi_)")),
]
KINDS = ["kernel TCP/IP", "user"] + [kind for kind, _ in KERNEL_KINDS]


def kind_of(kernel, symbol):
    """The kind of work of one leaf: `kernel` is True for a kernel symbol ([k] in perf report)."""
    if not kernel:
        return "user"
    name = symbol.lstrip("_")
    return next((kind for kind, pattern in KERNEL_KINDS if pattern.match(name)), "kernel TCP/IP")


def split(perf_data):
    """{kind: percent of the samples} of one perf.data."""
    out = subprocess.run(["perf", "report", "-i", perf_data, "--stdio", "--no-children",
                          "--sort", "dso,sym", "--percent-limit", "0", "-q"],
                         capture_output=True, text=True).stdout
    result = {kind: 0.0 for kind in KINDS}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\S+\s+\[([k.])\]\s+(\S+)", line)
        if m:
            result[kind_of(m.group(2) == "k", m.group(3))] += float(m.group(1))
    return result
