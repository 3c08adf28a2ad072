"""The bubblewrap backend's seccomp filter: the BPF program itself, then the filter at work in a sandbox."""

from __future__ import annotations

import platform
import struct
import textwrap

import pytest

from sandbox import Limits, Status
from sandbox.seccomp import REFUSED, SYSCALL_NUMBERS, UnsupportedArchitecture, build_filter, machine_arch

ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0x80000000  # SECCOMP_RET_ALLOW, _ERRNO | EPERM, _KILL_PROCESS
X86_64, AARCH64, I386 = 0xC000003E, 0xC00000B7, 0x40000003  # AUDIT_ARCH_*
QUICK = Limits(wall_time_s=10.0, cpu_time_s=10.0)


def decode(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


def evaluate(program: bytes, arch: int, nr: int) -> int:
    """Run the filter on ``struct seccomp_data {int nr; u32 arch; ...}``: only what build_filter emits."""
    data, accumulator, pc, instructions = {0: nr, 4: arch}, 0, 0, decode(program)
    while True:
        code, jt, jf, k = instructions[pc]
        if code == 0x20:  # ld [k]
            accumulator = data[k]
        elif code == 0x15:  # jeq #k
            pc += jt if accumulator == k else jf
        elif code == 0x35:  # jge #k
            pc += jt if accumulator >= k else jf
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


def test_a_one_syscall_filter_is_the_hand_derived_program():
    # ld arch; jeq x86_64 ? skip 1 : 0; kill; ld nr; jge 0x40000000 (x32) -> +2 = EPERM at 7;
    # jeq 101 (ptrace) -> +1 = EPERM at 7; allow; EPERM.
    assert decode(build_filter("x86_64", refused=("ptrace",))) == [
        (0x20, 0, 0, 4),
        (0x15, 1, 0, X86_64),
        (0x06, 0, 0, KILL),
        (0x20, 0, 0, 0),
        (0x35, 2, 0, 0x40000000),
        (0x15, 1, 0, 101),
        (0x06, 0, 0, ALLOW),
        (0x06, 0, 0, EPERM),
    ]
    # AArch64 has no x32 ABI: no jge; ptrace is 117 there.
    assert decode(build_filter("aarch64", refused=("ptrace",)))[4:] == [
        (0x15, 1, 0, 117),
        (0x06, 0, 0, ALLOW),
        (0x06, 0, 0, EPERM),
    ]


@pytest.mark.parametrize(
    ("arch", "audit_arch", "nr", "expected"),
    [
        ("x86_64", X86_64, 101, EPERM),  # ptrace
        ("x86_64", X86_64, 310, EPERM),  # process_vm_readv
        ("x86_64", X86_64, 438, EPERM),  # pidfd_getfd
        ("x86_64", X86_64, 321, EPERM),  # bpf
        ("x86_64", X86_64, 272, EPERM),  # unshare
        ("x86_64", X86_64, 0, ALLOW),  # read
        ("x86_64", X86_64, 56, ALLOW),  # clone
        ("x86_64", X86_64, 434, ALLOW),  # pidfd_open, kept
        ("x86_64", X86_64, 0x40000000 | 39, EPERM),  # x32 getpid
        ("x86_64", I386, 20, KILL),  # i386 getpid through int 0x80
        ("x86_64", AARCH64, 0, KILL),
        ("aarch64", AARCH64, 117, EPERM),  # ptrace
        ("aarch64", AARCH64, 438, EPERM),  # pidfd_getfd
        ("aarch64", AARCH64, 101, ALLOW),  # nanosleep there (ptrace on x86_64)
        ("aarch64", X86_64, 117, KILL),
    ],
)
def test_the_filter_answers(arch, audit_arch, nr, expected):
    assert evaluate(build_filter(arch), audit_arch, nr) == expected


def test_every_refused_syscall_is_refused_and_nothing_else():
    for arch, table in SYSCALL_NUMBERS.items():
        program, audit_arch = build_filter(arch), {"x86_64": X86_64, "aarch64": AARCH64}[arch]
        refused = {table[name] for name in REFUSED if name in table}
        assert all(evaluate(program, audit_arch, nr) == EPERM for nr in refused)
        assert all(evaluate(program, audit_arch, nr) == ALLOW for nr in set(range(460)) - refused)


def test_an_unknown_architecture_raises():
    assert machine_arch("arm64") == machine_arch("aarch64") == "aarch64"
    assert machine_arch("AMD64") == "x86_64"
    with pytest.raises(UnsupportedArchitecture, match="riscv64"):
        build_filter("riscv64")
    with pytest.raises(KeyError, match="not_a_syscall"):
        build_filter("x86_64", refused=("not_a_syscall",))


# The filter at work: calls that succeed without it (on the program itself, or harmlessly) get EPERM.
REFUSED_ON_ITSELF = textwrap.dedent(
    """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    NR = __NR__
    def errno_of(*args):
        ctypes.set_errno(0)
        return "ok" if libc.syscall(*args) >= 0 else os.strerror(ctypes.get_errno())
    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]
    source, target = ctypes.create_string_buffer(b"x" * 8), ctypes.create_string_buffer(8)
    local = IoVec(ctypes.cast(target, ctypes.c_void_p), 8)
    remote = IoVec(ctypes.cast(source, ctypes.c_void_p), 8)
    pidfd = os.pidfd_open(os.getpid())
    print("pidfd_open ok")
    vectors = (ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    print("process_vm_readv", errno_of(NR["process_vm_readv"], os.getpid(), *vectors))
    print("pidfd_getfd", errno_of(NR["pidfd_getfd"], pidfd, 1, 0))
    print("ptrace", errno_of(NR["ptrace"], 0, 0, 0, 0))  # PTRACE_TRACEME
    print("unshare", errno_of(NR["unshare"], 0))
    print("keyctl", errno_of(NR["keyctl"], 0, -2, 1))  # KEYCTL_GET_KEYRING_ID, the process keyring
    print("userfaultfd", errno_of(NR["userfaultfd"], 0))
    print("bpf", errno_of(NR["bpf"], 0, None, 0))
    print("io_uring_setup", errno_of(NR["io_uring_setup"], 1, ctypes.create_string_buffer(120)))
    if "x32_getpid" in NR:
        print("x32 getpid", errno_of(NR["x32_getpid"]))
    with open("/proc/self/mem", "r+b", 0) as memory:  # its own memory: not another process, allowed
        memory.seek(ctypes.addressof(source))
        memory.write(b"y")
    print("own memory", source.value[:2].decode())
    """
)

I386_SYSCALL = textwrap.dedent(
    """
    import ctypes, mmap
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20 (i386 getpid); int 0x80; ret
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    print("before", flush=True)
    print("survived", ctypes.CFUNCTYPE(ctypes.c_int)(address)(), flush=True)
    """
)


@pytest.mark.parametrize("sandbox", ["bubblewrap"], indirect=True)
def test_refused_syscalls_fail_with_eperm_even_on_the_program_itself(sandbox):
    arch = machine_arch()
    numbers = {name: SYSCALL_NUMBERS[arch][name] for name in REFUSED if name in SYSCALL_NUMBERS[arch]}
    if arch == "x86_64":
        numbers["x32_getpid"] = 0x40000000 | 39
    result = sandbox.run(REFUSED_ON_ITSELF.replace("__NR__", repr(numbers)), limits=QUICK)
    lines = result.stdout.splitlines()
    assert result.status is Status.OK, result
    assert lines[0] == "pidfd_open ok" and lines[-1] == "own memory yx", result
    refused = lines[1:-1]
    assert len(refused) == (9 if arch == "x86_64" else 8)
    assert all(line.endswith("Operation not permitted") for line in refused), result.stdout


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 entry exists on x86_64 only")
@pytest.mark.parametrize("sandbox", ["bubblewrap"], indirect=True)
def test_a_syscall_of_another_architecture_kills_the_program(sandbox):
    # int 0x80 enters the kernel as i386: the architecture check kills the process (SIGSYS; SIGSEGV on
    # kernels without the i386 entry). Without the filter this would print "survived" and a pid.
    result = sandbox.run(I386_SYSCALL, limits=QUICK)
    assert (result.status, result.stdout) == (Status.KILLED, "before\n"), result


HONEST = textwrap.dedent(
    """
    import subprocess, sys, threading
    totals = []
    threads = [threading.Thread(target=lambda i=i: totals.append(sum(range(i * 1000)))) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
    print(len(totals), child.stdout.strip())
    """
)

# asyncio's PidfdChildWatcher (the default from Python 3.12) waits through pidfd_open, which the filter keeps.
ASYNC_CHILD = textwrap.dedent(
    """
    import asyncio, subprocess, sys
    if sys.version_info < (3, 12):
        asyncio.set_child_watcher(asyncio.PidfdChildWatcher())
    async def spawn():
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", "print('async')", stdout=subprocess.PIPE)
        return (await process.communicate())[0].decode().strip()
    print(asyncio.run(spawn()))
    """
)


@pytest.mark.parametrize("sandbox", ["bubblewrap", pytest.param("docker", marks=pytest.mark.docker)], indirect=True)
def test_threads_and_subprocesses_still_work(sandbox):
    result = sandbox.run(HONEST, limits=QUICK)
    assert (result.status, result.stdout) == (Status.OK, "4 42\n"), result


@pytest.mark.parametrize("sandbox", ["bubblewrap", pytest.param("docker", marks=pytest.mark.docker)], indirect=True)
def test_asyncio_subprocesses_still_work(sandbox):
    # On docker this also needs libgcc_s in the image: asyncio's waiter thread exits through pthread_exit.
    result = sandbox.run(ASYNC_CHILD, limits=QUICK)
    assert (result.status, result.stdout) == (Status.OK, "async\n"), result
