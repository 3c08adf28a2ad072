"""``agents.memory``: the peak resident memory between two readings, and giving freed heap pages back."""

from __future__ import annotations

import pytest

from agents.memory import peak_resident_mib, resident_mib, return_free_memory


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
