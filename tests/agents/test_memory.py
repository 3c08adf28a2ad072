"""``agents.memory``: the peak resident memory between two readings, giving freed heap pages back, and a fixed mmap
threshold."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents.memory import map_large_allocations, peak_resident_mib, resident_mib, return_free_memory


def test_a_reading_holds_the_peak_in_between_and_the_next_starts_from_the_current_memory() -> None:
    peak_resident_mib()  # start a peak here
    block = bytearray(256 * 2**20)  # zero pages are not resident until written
    block[::4096] = b"x" * len(block[::4096])  # one byte a page: 256 MiB resident
    del block
    return_free_memory()
    with_block = peak_resident_mib()
    after = peak_resident_mib()  # nothing large happened since the last reading
    assert with_block is not None and after is not None
    assert with_block - after >= 200  # the 256 MiB block counted in the first peak, not in the second


def test_reading_without_reset_keeps_the_peak() -> None:
    peak_resident_mib()
    block = bytearray(128 * 2**20)
    block[::4096] = b"x" * len(block[::4096])
    del block
    first = peak_resident_mib(reset=False)
    assert first is not None and peak_resident_mib(reset=False) == pytest.approx(first, abs=1.0)


def test_resident_memory_counts_a_written_block_while_it_lives() -> None:
    before = resident_mib()
    block = bytearray(128 * 2**20)
    block[::4096] = b"x" * len(block[::4096])
    during = resident_mib()
    assert before is not None and during is not None and during - before >= 100
    assert during <= peak_resident_mib(reset=False)  # the peak is never below the memory now
    del block


# After glibc frees a large mapped block it raises its mmap threshold to that block's size, so the next blocks
# below it come from the heap, and freed between live allocations they stay resident. With the threshold fixed
# below their size, each is its own mapping and leaves with its tensor.
FREED_BETWEEN_PINS = """
import sys, torch
from agents.memory import map_large_allocations, resident_mib
print("taken", map_large_allocations(float(sys.argv[1])))
big = torch.ones(4 * 2**20)  # 16 MiB, mapped; freed, it raises glibc's own threshold to 16 MiB
del big
before = resident_mib()
blocks, pins = [], []
for _ in range(8):  # 8 blocks of 8 MiB, each followed by a live 256 KiB tensor
    blocks.append(torch.ones(2 * 2**20))
    pins.append(torch.ones(64 * 1024))
del blocks
print("kept", resident_mib() - before)
"""


def _kept_after_free(threshold_mib: float) -> tuple[bool, float]:
    done = subprocess.run(
        [sys.executable, "-c", FREED_BETWEEN_PINS, str(threshold_mib)], capture_output=True, text=True, check=True
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    return lines["taken"] == "True", float(lines["kept"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator and /proc are Linux's")
def test_a_fixed_mmap_threshold_returns_freed_blocks_that_glibcs_own_would_keep() -> None:
    taken, kept = _kept_after_free(4)
    assert taken and kept < 8  # the 64 MiB left with their tensors
    taken, kept = _kept_after_free(0)  # glibc's own, adjusting threshold
    assert not taken and kept > 48  # most of the 64 MiB still resident, though freed


def test_an_mmap_threshold_beyond_glibcs_range_is_refused() -> None:
    with pytest.raises(ValueError, match=r"0 \(glibc's own\) to 32 MiB, not 64"):
        map_large_allocations(64)
    with pytest.raises(ValueError, match="not -1"):
        map_large_allocations(-1)
