"""trials.memory: the trial's peak memory from /proc, an address-space cap, what counts as OOM."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from trials.memory import PeakMemory, is_oom, near_address_limit, trial_memory_kib


def test_what_counts_as_out_of_memory():
    # Rule: a MemoryError is OOM; so is a RuntimeError carrying one of MindSpore's OOM texts.
    assert is_oom(MemoryError())
    assert is_oom(RuntimeError("Allocate memory failed, need 4096 bytes"))
    # Rule: other errors are not, unless this process is at its address-space cap.
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process runs under an address-space cap")
    assert not near_address_limit()
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("out of memory"))  # only RuntimeError carries the text


def test_peak_memory_covers_what_the_trial_holds_and_what_it_held_between_samples():
    peak = PeakMemory()
    first = peak.sample()
    held = bytearray(64 * 1024**2)  # 64 MiB, touched
    held[::4096] = b"\1" * len(held[::4096])
    holding = trial_memory_kib()[0] / 1024**2
    second = peak.sample()
    # Rule: the peak covers what the trial holds now (the 64 MiB with it), and never
    # falls. Within 1 MiB: PSS divides a shared page among the processes that map it, so
    # another MindSpore process starting between the two reads moves it (40 KiB, once,
    # in the suite's workers).
    assert second >= holding - 1 / 1024 and second >= first
    del held
    assert peak.sample() >= second
    # Rule: what this process held and freed before a sample still counts (VmHWM - VmRSS
    # is added): a tracker started after the memory was freed still sees it.
    assert PeakMemory().sample() >= trial_memory_kib()[0] / 1024**2 + 0.05


def test_limit_address_space_makes_a_large_allocation_fail_fast():
    # In a child process: the cap is inherited by everything this pytest starts later.
    code = ("from trials.memory import limit_address_space, near_address_limit\n"
            "limit_address_space(1.0)\n"
            "try:\n    bytearray(2 * 1024**3)\nexcept MemoryError:\n    print('refused')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30)
    # Rule: RLIMIT_AS makes an allocation above the budget fail (a MemoryError, not a kill).
    assert out.stdout.strip() == "refused", out.stderr
