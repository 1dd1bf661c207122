"""The progress reporter of long phases (citewise/progress.py): plain lines without a terminal, on a
fake clock (no sleeping, no timing flakiness), a tqdm bar on a terminal, nothing with ``-q``."""

from __future__ import annotations

import io

from citewise import progress
from citewise.progress import Heartbeat, Phase, duration


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _plain(label: str = "embedding", unit: str = " papers", total: int | None = 1000, **kw) -> tuple:
    clock, out = FakeClock(), io.StringIO()
    phase = Phase(label, unit, total, stream=out, tty=False, clock=clock, **kw)
    return phase, clock, out


def test_plain_lines_at_start_every_ten_seconds_and_at_the_end() -> None:
    phase, clock, out = _plain()
    for _ in range(100):  # 100 updates of 10 papers, 0.5 s apart: 50 s
        clock.now += 0.5
        phase.update(10)
    phase.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "citewise: embedding: started of 1,000 papers"
    assert lines[-1] == "citewise: embedding: done, 1,000 papers in 50 s, 20 papers/s"
    middle = lines[1:-1]
    assert len(middle) == 5  # at 10, 20, 30, 40 and 50 s
    assert middle[0] == "citewise: embedding: 200 of 1,000 papers (20%), 20 papers/s, 40 s left"
    assert all(line.startswith("citewise: embedding: ") for line in middle)


def test_plain_lines_are_not_repeated_while_updates_are_frequent() -> None:
    phase, clock, out = _plain(total=None)
    for _ in range(10_000):  # 10,000 updates in 9.999 s: no line but the start
        clock.now += 0.001
        phase.update()
    assert out.getvalue().splitlines() == ["citewise: embedding: started"]
    clock.now += 0.001
    phase.update()
    assert out.getvalue().splitlines()[-1] == "citewise: embedding: 10,001 papers, 1,000 papers/s"


def test_a_total_given_later_and_a_detail() -> None:
    phase, clock, out = _plain(lazy=True, total=None)
    phase.set(0, 0)  # nothing to do: a lazy phase stays silent
    assert out.getvalue() == ""
    phase.set(0, 500)
    clock.now += 60
    phase.set(250)
    phase.set_detail("3,000 records")
    clock.now += 11
    phase.set_detail("4,000 records")
    lines = out.getvalue().splitlines()
    assert lines[0] == "citewise: embedding: started of 500 papers"
    assert lines[1] == "citewise: embedding: 250 of 500 papers (50%), 4 papers/s, 1 min 00 s left"
    assert lines[2].endswith("3 papers/s, 1 min 11 s left, 4,000 records")


def test_a_lazy_phase_with_nothing_to_do_prints_nothing() -> None:
    phase, _, out = _plain(lazy=True, total=None)
    phase.close()
    assert out.getvalue() == ""


def test_bytes_are_shown_as_sizes() -> None:
    phase, clock, out = _plain("importing", "B", total=10 * 1024 * 1024, binary=True)
    clock.now += 12
    phase.set(3 * 1024 * 1024)
    lines = out.getvalue().splitlines()
    assert lines[0] == "citewise: importing: started of 10.0 MB"
    assert lines[1] == "citewise: importing: 3.0 MB of 10.0 MB (30%), 256.0 KB/s, 28 s left"


def test_warnings_go_through_and_quiet_is_silent() -> None:
    phase, _, out = _plain()
    phase.write("citewise: warning: x")
    assert out.getvalue().splitlines()[-1] == "citewise: warning: x"
    out2 = io.StringIO()
    quiet = Phase("embedding", " papers", 10, quiet=True, stream=out2, tty=False)
    quiet.update(10)
    quiet.set_detail("x")
    quiet.close()
    assert out2.getvalue() == ""
    quiet.write("citewise: warning: a broken entry")  # warnings are not progress: -q shows them
    assert out2.getvalue() == "citewise: warning: a broken entry\n"


def test_on_a_terminal_a_bar_with_eta_that_redraws_between_updates(monkeypatch) -> None:
    """A tqdm bar (count, rate, ETA); a ``set_detail`` alone redraws it once half a second has
    passed since the last drawing (the update before it drew nothing: too soon)."""
    out = io.StringIO()
    phase = Phase("search index", " papers", 100, stream=out, tty=True)
    assert out.getvalue().startswith("\rsearch index:   0%")
    phase.update(50)
    later = progress.time.time() + 1.0
    monkeypatch.setattr(progress.time, "time", lambda: later)
    drawn = len(out.getvalue())
    phase.set_detail("merging")
    redrawn = out.getvalue()[drawn:]
    assert "50/100" in redrawn and "merging" in redrawn and "<" in redrawn  # elapsed<ETA
    phase.close()


def test_beats_of_a_step_that_cannot_count_its_work() -> None:
    """A heartbeat phase (the nearest-neighbour graph): its start, elapsed time every ten seconds
    from its first beat on, and its end, without a count."""
    phase, clock, out = _plain("nearest-neighbour index", "", total=None, lazy=True)
    since = clock.now
    clock.now += 1
    phase.beat(since)
    for _ in range(25):
        clock.now += 1
        phase.beat(since)
    phase.close()
    assert out.getvalue().splitlines() == [
        "citewise: nearest-neighbour index: started",
        "citewise: nearest-neighbour index: 11 s so far",
        "citewise: nearest-neighbour index: 21 s so far",
        "citewise: nearest-neighbour index: done in 26 s",
    ]


def test_a_heartbeat_thread_beats_until_stopped_and_a_quick_step_shows_nothing() -> None:
    out = io.StringIO()
    with Heartbeat(Phase("graph", "", stream=out, tty=False, lazy=True), after=60):
        pass  # done within ``after``: nothing shown
    assert out.getvalue() == ""
    beat = Heartbeat(Phase("graph", "", stream=out, tty=False, lazy=True), after=0, every=0.01)
    beat.start()
    deadline = progress.time.monotonic() + 30
    while "started" not in out.getvalue() and progress.time.monotonic() < deadline:
        progress.time.sleep(0.01)
    beat.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "citewise: graph: started" and lines[-1].startswith("citewise: graph: done in ")
    beat.phase.beat()  # a beat after the end changes nothing
    assert out.getvalue().splitlines() == lines


def test_durations() -> None:
    assert [duration(s) for s in (0.4, 42, 185, 3725)] == ["0.4 s", "42 s", "3 min 05 s", "1 h 02 min"]
