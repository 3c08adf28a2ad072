"""The seccomp filter of the bubblewrap backend: a classic-BPF program, built here, that bwrap installs.

Why. In bubblewrap's namespaces the program runs as the same user as every other process there, with
no capabilities, so the kernel's ptrace checks alone let it attach to, read and write any of them.
Measured before this filter: ``PTRACE_ATTACH`` to pid 1 (bwrap's init) succeeded, and so did
``pidfd_getfd`` of pid 1's standard output. Docker's backend does not allow it (its runner is root,
the program uid 65534 without capabilities, under Docker's default seccomp profile). The filter is
one of two measures; the other is that bwrap runs the program as pid 1 itself (``--as-pid-1``), so no
process it did not start exists in its pid namespace (reading ``/proc/<pid>/environ`` or
``/proc/<pid>/mem`` is an access check of the ptrace family but not a system call; no filter can stop
it, only the absence of the target).

What. The program (``struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}`` records, as
``seccomp_export_bpf`` writes them) checks ``seccomp_data.arch``, kills the process on any other
architecture (x86_64's i386 entry, ``int 0x80``, included), refuses the x32 ABI on x86_64 (syscall
numbers with bit 30 set) and answers ``EPERM`` to the syscalls of :data:`REFUSED`; everything else is
allowed. It is a deny list, like Docker's default profile read for an unprivileged user: every
syscall below is one Docker's profile refuses to a container without the matching capability
(``CAP_SYS_PTRACE``, ``CAP_SYS_ADMIN``, ``CAP_SYS_MODULE``, ``CAP_SYS_BOOT``, ...), or refuses to all
(``keyctl``, ``add_key``, ``request_key``, ``userfaultfd``). One difference: Docker allows ``ptrace``
on kernels from 4.8 on (its uid and capability checks suffice there); here the checks do not, so it
is refused.

Kept on purpose: ``pidfd_open`` (asyncio's child watcher uses it; a pidfd only polls and signals, under
the same permission checks as ``kill``, and with ``pidfd_getfd`` refused it reaches no descriptor),
``clone`` and ``clone3`` (new namespaces need capabilities the program lacks, and bwrap's
``--disable-userns`` forbids new user namespaces), ``personality``.

Refused (see :data:`REFUSED`): reading or writing other processes (``ptrace``, ``process_vm_readv``,
``process_vm_writev``, ``pidfd_getfd``, ``kcmp``, ``process_madvise``); the kernel's large attack
surfaces that no judged program needs (``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*``,
the key ring calls); mounts and namespaces (``mount``, ``umount2``, ``pivot_root``, the new mount API,
``unshare``, ``setns``); file handles that bypass path checks (``open_by_handle_at``,
``name_to_handle_at``); kernel modules, kexec, reboot, swap, accounting, quotas, the clock, the
kernel log, ``fanotify_init``, ``lookup_dcookie``, and on x86_64 ``iopl`` and ``ioperm``.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["REFUSED", "SYSCALL_NUMBERS", "UnsupportedArchitecture", "build_filter", "machine_arch"]

REFUSED = (
    # other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "process_madvise",
    # large kernel attack surfaces
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    # mounts and namespaces
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    # file handles
    "open_by_handle_at",
    "name_to_handle_at",
    # the machine
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "syslog",
    "fanotify_init",
    "lookup_dcookie",
    "iopl",
    "ioperm",
)

# Numbers from the kernel's tables: arch/x86/entry/syscalls/syscall_64.tbl and, for AArch64, the
# generic table include/uapi/asm-generic/unistd.h (AArch64 has no iopl or ioperm).
# fmt: off
SYSCALL_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
        "process_madvise": 440, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250,
        "add_key": 248, "request_key": 249, "mount": 165, "umount2": 166, "pivot_root": 155,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 272, "setns": 308, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168,
        "acct": 163, "quotactl": 179, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305,
        "syslog": 103, "fanotify_init": 300, "lookup_dcookie": 212, "iopl": 172, "ioperm": 173,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272,
        "process_madvise": 440, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219,
        "add_key": 217, "request_key": 218, "mount": 40, "umount2": 39, "pivot_root": 41,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 97, "setns": 268, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "kexec_load": 104, "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225,
        "acct": 89, "quotactl": 60, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266,
        "syslog": 116, "fanotify_init": 262, "lookup_dcookie": 18,
    },
}
# fmt: on
_ABSENT = {"aarch64": ("iopl", "ioperm")}  # names of REFUSED with no syscall on that architecture

# seccomp_data.arch values (include/uapi/linux/audit.h) and the x32 ABI's syscall-number bit.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
_MACHINE_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}

# Classic BPF (include/uapi/linux/bpf_common.h, filter.h) and seccomp return values (seccomp.h).
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = seccomp_data[k]
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K: pc += (A == k) ? jt : jf
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K: pc += (A >= k) ? jt : jf
BPF_RET_K = 0x06  # BPF_RET | BPF_K: return k
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
NR_OFFSET, ARCH_OFFSET = 0, 4  # struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; ...}
_INSTRUCTION = struct.Struct("=HBBI")  # struct sock_filter, native byte order as the kernel reads it


class UnsupportedArchitecture(RuntimeError):
    """No syscall table for this machine: the bubblewrap backend cannot build its seccomp filter."""


def machine_arch(machine: str | None = None) -> str:
    """The table name (``x86_64`` or ``aarch64``) for ``machine`` (default ``platform.machine()``)."""
    machine = machine or platform.machine()
    arch = _MACHINE_ALIASES.get(machine.lower())
    if arch is None:
        raise UnsupportedArchitecture(
            f"no seccomp syscall table for machine {machine!r} (supported: x86_64, aarch64): the bubblewrap "
            "sandbox refuses to run without its filter; use the docker backend on this machine"
        )
    return arch


def build_filter(arch: str | None = None, refused: tuple[str, ...] = REFUSED) -> bytes:
    """The filter for ``arch`` (default: this machine's) as bwrap's ``--seccomp FD`` reads it.

    Layout: check the architecture (else kill), load the syscall number, refuse x32 on x86_64, one
    ``jeq`` per refused syscall jumping to the ``EPERM`` return, then allow. Raises
    :class:`UnsupportedArchitecture` for a machine without a table and ``KeyError`` for a syscall
    missing from the table (names absent on an architecture, e.g. ``iopl`` on AArch64, are skipped).
    """
    arch = machine_arch(arch)
    table = SYSCALL_NUMBERS[arch]
    unknown = [name for name in refused if name not in table and name not in _ABSENT.get(arch, ())]
    if unknown:
        raise KeyError(f"no {arch} syscall number for {unknown}")
    numbers = [table[name] for name in refused if name in table]
    head = [(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET), (BPF_JEQ_K, 1, 0, AUDIT_ARCH[arch])]
    head += [(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS), (BPF_LD_W_ABS, 0, 0, NR_OFFSET)]
    checks = [(BPF_JGE_K, X32_SYSCALL_BIT)] if arch == "x86_64" else []
    checks += [(BPF_JEQ_K, number) for number in numbers]
    if len(checks) > 255:  # a jump offset is one byte
        raise ValueError(f"{len(checks)} checks: too many for one-byte jump offsets")
    # Check i (0-based) sits at len(head) + i; the EPERM return follows the allow return that ends the
    # checks, so it lies len(checks) - i instructions ahead of the one after check i.
    program = head + [(code, len(checks) - i, 0, k) for i, (code, k) in enumerate(checks)]
    program += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)]
    return b"".join(_INSTRUCTION.pack(*instruction) for instruction in program)
