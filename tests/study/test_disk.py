"""autotune.study.disk: a full disk is one line naming the directory; a reserve gives room."""

from __future__ import annotations

import errno

import pytest

from autotune.study.disk import (
    RESERVE_BYTES,
    DiskFull,
    Reserve,
    ServerDiskFull,
    free_bytes,
    full_is_diskfull,
    is_full,
)


def test_free_bytes_of_a_path_not_yet_made_is_its_nearest_ancestors(tmp_path):
    # Rule: a runs directory that does not exist yet is judged by the disk it will be on.
    assert free_bytes(tmp_path / "a" / "b") == free_bytes(tmp_path) > 0


def test_a_write_refused_for_space_becomes_diskfull_naming_the_directory(tmp_path):
    # Rule: ENOSPC (and EDQUOT) is a full disk; other OS errors are not.
    assert is_full(OSError(errno.ENOSPC, "full")) and is_full(OSError(errno.EDQUOT, "q"))
    assert not is_full(OSError(errno.EACCES, "denied")) and not is_full(ValueError())
    # Rule: inside the block a full write raises DiskFull for the file's directory.
    with pytest.raises(DiskFull) as caught:
        with full_is_diskfull(tmp_path):
            raise OSError(errno.ENOSPC, "No space", str(tmp_path / "run" / "metrics.jsonl"))
    assert caught.value.where == tmp_path / "run"
    # Rule: any other OSError passes through unchanged.
    with pytest.raises(PermissionError):
        with full_is_diskfull(tmp_path):
            raise PermissionError(errno.EACCES, "denied")


def test_the_message_says_where_how_much_is_free_what_was_done_and_how_to_resume(tmp_path):
    full = DiskFull(tmp_path, free=3 * 1024**2)
    full.consequences.append("trial 4 was stopped and re-queued")
    text = str(full)
    # Rule: the directory, its free space in readable units, the consequences, the fix.
    assert str(tmp_path) in text and "(3.0 MiB free)" in text
    assert "; trial 4 was stopped and re-queued:" in text and "run the same command" in text
    assert "(512 B free)" in str(DiskFull(tmp_path, free=512))
    # Rule: a database server's disk is named as the server's, not a local directory.
    assert "database server" in str(ServerDiskFull("db.example:5432", free=0))


def test_the_reserve_takes_real_room_and_is_given_up(tmp_path):
    reserve = Reserve(tmp_path / "study")
    reserve.hold()
    # Rule: the reserve is RESERVE_BYTES written (not sparse) in the study directory.
    assert reserve.path.stat().st_size == RESERVE_BYTES
    assert reserve.path.stat().st_blocks * 512 >= RESERVE_BYTES
    reserve.hold()  # holding again is a no-op
    reserve.release()
    # Rule: releasing it removes the file, and releasing twice is harmless.
    assert not reserve.path.exists()
    reserve.release()
