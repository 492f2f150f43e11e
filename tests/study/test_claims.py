"""autotune.study.claims: one launch claim at a time per study, across threads and processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from autotune.study.claims import launch_lock, lock_key


def test_the_lock_key_is_a_stable_signed_64_bit_number_per_study():
    # Rule: the same study always gets the same key (every worker must agree), others not.
    assert lock_key("s") == lock_key("s") != lock_key("t")
    # Rule: it fits PostgreSQL's signed bigint advisory-lock space.
    assert all(-(2**63) <= lock_key(n) < 2**63 for n in ("a", "b", "study-1"))


def test_sqlite_claims_never_overlap_and_use_a_file_beside_the_database(tmp_path):
    url = "sqlite:///" + str(tmp_path / "study.db")
    inside, overlaps = [], []

    def claim(i: int) -> None:
        with launch_lock(url, "s"):
            if inside:
                overlaps.append(i)
            inside.append(i)
            time.sleep(0.02)
            inside.remove(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    # Rule: no two claims are inside the critical section at once.
    assert overlaps == [] and not any(t.is_alive() for t in threads)
    # Rule: SQLite's lock is a flock'ed file next to the database.
    assert (tmp_path / "study.launch-lock").is_file()


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    url = "sqlite:///" + str(tmp_path / "study.db")
    try:
        with launch_lock(url, "s"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    done = threading.Event()

    def next_claim() -> None:
        with launch_lock(url, "s"):
            done.set()

    threading.Thread(target=next_claim, daemon=True).start()
    # Rule: a claim that failed frees the lock for the next one.
    assert done.wait(2)


HOLD = """
import sys, time
from autotune.study.claims import launch_lock
with launch_lock(sys.argv[1], "s"):
    print("held", flush=True)
    time.sleep(0.6)
"""


def test_another_process_waits_for_the_claim(tmp_path):
    url = "sqlite:///" + str(tmp_path / "study.db")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with launch_lock(url, "s"):
            waited = time.monotonic() - start
    finally:
        holder.wait(10)
    # Rule: across processes the flock excludes: this claim waits for the other's to end.
    assert waited > 0.3


WRITER = """
import sys, optuna
from autotune.study.schema.repeats import add_repeats
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="s", storage=sys.argv[1])
for i in range(int(sys.argv[3])):
    add_repeats(study, {0: [{"tokens_per_s": 1000.0, "run": f"{sys.argv[2]}/{i}"}]}, "confirm")
"""


def test_two_processes_adding_repeats_at_once_lose_none(tmp_path):
    """Repeats are one study attribute, read, added to and written back: two writers (two
    confirms, confirm beside a sweep) each add 15, and all 30 are stored."""
    import optuna

    from autotune.study.schema.repeats import stored_repeats

    url = "sqlite:///" + str(tmp_path / "study.db")
    optuna.create_study(study_name="s", storage=url)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, url, name, "15"])
               for name in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    runs = [r.run for r in stored_repeats(optuna.load_study(study_name="s", storage=url))[0]]
    assert sorted(runs) == sorted(f"{n}/{i}" for n in "ab" for i in range(15))


UPDATER = """
import sys, time, optuna
from autotune.study.claims import update_attribute
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="s", storage=sys.argv[1])

def add(d):  # a writer that takes a while between its read and its write
    time.sleep(0.01)
    d[f"{sys.argv[2]}{i}"] = i

for i in range(int(sys.argv[3])):
    update_attribute(study, "autotune.blob", add)
"""


def test_every_keyed_blob_is_updated_under_its_lock_by_two_processes(tmp_path):
    """The one read-modify-write of a dict-valued study attribute (confirm's verdicts,
    profiles, stage results, uploads, repeats all go through it): two writers each add 15
    keys, and all 30 are stored."""
    import optuna

    url = "sqlite:///" + str(tmp_path / "study.db")
    optuna.create_study(study_name="s", storage=url)
    writers = [subprocess.Popen([sys.executable, "-c", UPDATER, url, name, "15"])
               for name in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    stored = optuna.load_study(study_name="s", storage=url).user_attrs["autotune.blob"]
    assert sorted(stored) == sorted(f"{n}{i}" for n in "ab" for i in range(15))


TASK = """
import sys, time, optuna
from autotune.study.claims import task_lock
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="s", storage=sys.argv[1])
with task_lock(study, "final-race"):
    print("held", flush=True)
    time.sleep(0.6)
"""


def test_a_task_held_by_another_worker_is_waited_for_and_other_locks_stay_free(tmp_path):
    """Work a study needs once (the final race, the winner's profile): a worker that finds
    another doing it says so and waits; meanwhile the launch lock, the attributes and the
    other tasks stay free (the holder itself writes its runs through them)."""
    import optuna

    from autotune.study.claims import attribute_lock, task_lock

    url = "sqlite:///" + str(tmp_path / "study.db")
    study = optuna.create_study(study_name="s", storage=url)
    holder = subprocess.Popen([sys.executable, "-c", TASK, url], stdout=subprocess.PIPE,
                              text=True)
    waits = []
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with launch_lock(url, "s"), attribute_lock(study, "autotune.repeats"), \
                task_lock(study, "profile-winner", on_wait=lambda: waits.append("profile")):
            free = time.monotonic() - start
        with task_lock(study, "final-race", on_wait=lambda: waits.append("race")):
            waited = time.monotonic() - start
    finally:
        holder.wait(10)
    # Rule: only the same task waits, and says so once before it does.
    assert free < 0.3 and waited > 0.3
    assert waits == ["race"]
