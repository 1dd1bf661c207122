"""One progress reporter for every long phase of a command (``citewise index``: importing, the
search index, embedding papers, the nearest-neighbour index, embedding citing texts), in three modes:

- stderr is a terminal: a tqdm bar with rate and ETA, redrawn at most every half second and at
  least as often as the phase reports (every phase reports at least every 2 s: per file or block of
  bytes when importing, per paper then per range of postings for the search index, per batch of a
  few dozen texts when embedding; a step inside one library call that reports nothing, the
  nearest-neighbour graph, gets a :class:`Heartbeat`: its elapsed time, every second);
- stderr is not a terminal (a pipe, a log file, a CI job): plain lines, one when the phase starts,
  one every ``PLAIN_EVERY`` seconds with done/total, rate and ETA, one when it ends, so a log
  shows that a 15-minute index is moving without filling with bar redraws;
- ``-q``: nothing.

Why one class rather than a tqdm bar per phase: tqdm draws nothing at all without a terminal, so
an index run from a script or a service was silent for minutes, and each phase formatted its
own bar. The clock is a parameter so the plain mode's timing is tested without sleeping.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

PLAIN_EVERY = 10.0  # seconds between two plain lines of one phase
BAR_INTERVAL = 0.5  # the least seconds between two redraws of a terminal bar


def duration(seconds: float) -> str:
    """``0.4 s``, ``42 s``, ``3 min 05 s``, ``1 h 02 min``: how long, as a person reads it in a log."""
    if seconds < 9.95:
        return f"{max(0.0, seconds):.1f} s"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _amount(n: float, unit: str, binary: bool) -> str:
    """``12,345 papers`` or, for a phase counting bytes, ``12.3 MB``."""
    if not binary:
        return f"{int(n):,}{unit}"
    for prefix in ("", "K", "M", "G"):
        if abs(n) < 1024 or prefix == "G":
            return f"{n:.1f} {prefix}B" if prefix else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover - the loop returns


class Phase:
    """The progress of one phase; ``update``/``set`` as work is done, ``close`` at its end.

    ``total`` may be unknown at first (``set`` gives it later). ``unit`` follows the count
    (``" papers"``); ``binary`` counts bytes (``"B"``, shown as KB/MB). ``stream``, ``tty`` and
    ``clock`` are for tests: by default stderr, whether it is a terminal, and ``time.monotonic``."""

    def __init__(
        self,
        label: str,
        unit: str,
        total: int | None = None,
        *,
        quiet: bool = False,
        binary: bool = False,
        stream: IO[str] | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        lazy: bool = False,
    ) -> None:
        self.label, self.unit, self.total, self.binary = label, unit, total, binary
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.mode = "off" if quiet else ("bar" if tty else "plain")
        self.clock = clock
        self.n = 0
        self.detail = ""
        self.closed = False
        self.begun = False
        self.started = self._last_line = clock()
        self._redrawn = 0.0
        self._bar: Any = None
        self._lock = threading.RLock()  # a heartbeat thread may draw while the phase closes
        if not lazy:
            self._begin()

    def _begin(self, since: float | None = None) -> None:
        """Show the phase: its bar, or its plain ``started`` line. A ``lazy`` phase waits for its
        first work, so a step with nothing to do (no citing texts, nothing new to embed) shows
        nothing at all; ``since``: when its work began, if earlier (a heartbeat's first beat)."""
        self.begun = True
        self.started = self._last_line = self.clock() if since is None else since
        if self.mode == "bar":
            self._bar = self._make_bar()
            self._bar.start_t -= self.clock() - self.started  # a heartbeat's step began earlier
        elif self.mode == "plain":
            of = f" of {_amount(self.total, self.unit, self.binary)}" if self.total else ""
            self._line(f"started{of}")

    @property
    def disabled(self) -> bool:
        return self.mode == "off"

    def _make_bar(self) -> Any:
        from tqdm import tqdm

        options: dict[str, Any] = {"unit_scale": True, "unit_divisor": 1024} if self.binary else {}
        if not self.unit and self.total is None:  # a heartbeat's step: nothing counted, time only
            options["bar_format"] = "{desc}: {elapsed} so far{postfix}"
        return tqdm(
            total=self.total,
            desc=self.label,
            unit=self.unit,
            file=self.stream,
            dynamic_ncols=True,
            mininterval=BAR_INTERVAL,
            miniters=1,  # every update may redraw (once per BAR_INTERVAL): no skipped updates
            smoothing=0.1,
            **options,
        )

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.set(self.n + n)

    def set(self, done: int, total: int | None = None) -> None:
        """``done`` units of ``total`` (the total given or kept) are done."""
        if total is not None:
            self.total = total
        self.n = done
        if not self.begun:
            if not (done or self.total):
                return
            self._begin()
        if self.mode == "bar":
            if total is not None and self._bar.total != total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)
        self._tick()

    def set_detail(self, text: str) -> None:
        """A note shown after the count (``12,000 records, 610/s``); it counts as progress, so a
        phase whose count moves only at the end of a file still shows that it is moving."""
        self.detail = text
        if not self.begun:
            self._begin()
        if self.mode == "bar":
            self._bar.set_postfix_str(text, refresh=False)
        self._tick()

    def elapsed(self) -> float:
        """Seconds since the phase started."""
        return self.clock() - self.started

    def _tick(self) -> None:
        """Redraw the bar (at most every ``BAR_INTERVAL``) or print the plain line that is due."""
        if self.mode == "bar":  # tqdm's own clock: it redraws on update() by itself
            now = time.time()
            if now - max(self._bar.last_print_t, self._redrawn) >= BAR_INTERVAL:
                self._redrawn = now
                self._bar.refresh()
        elif self.mode == "plain":
            now = self.clock()
            if now - self._last_line >= PLAIN_EVERY:
                self._line(self._status(now))

    def write(self, message: str) -> None:
        """A line of its own (a warning) that does not tear the bar; shown with ``-q`` too: only
        the progress is quiet."""
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        """The phase is over: the bar stays as it ended; a plain log gets its closing line."""
        with self._lock:
            if self.closed or not self.begun:
                self.closed = True
                return
            self.closed = True
            if self.mode == "bar":
                self._bar.close()
            elif self.mode == "plain":
                elapsed = self.clock() - self.started
                rate = f", {self._rate(self.n / elapsed)}" if elapsed > 0 and self.n else ""
                what = f"done, {_amount(self.n, self.unit, self.binary)}" if self.n or self.total else "done"
                self._line(f"{what} in {duration(elapsed)}{rate}")

    def beat(self, since: float | None = None) -> None:
        """A sign of life from a step that cannot count its work (a library call of minutes):
        the bar's elapsed time moves, a plain log gets its line every ``PLAIN_EVERY`` seconds.
        ``since``: when the step began (by ``clock``), for a phase shown from its first beat."""
        with self._lock:
            if self.closed:
                return
            if not self.begun:
                self._begin(since)
            if self.mode == "bar":
                self._redrawn = time.time()
                self._bar.refresh()
            elif self.mode == "plain":
                self._tick()

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rate(self, per_second: float) -> str:
        return f"{_amount(per_second, self.unit, self.binary).strip()}/s"

    def _status(self, now: float) -> str:
        """``12,288 of 103,754 papers (12%), 1,310 papers/s, 1 min 10 s left``; ``1 min 10 s so
        far`` for a step that cannot count its work."""
        elapsed = now - self.started
        if not (self.n or self.total):
            return f"{duration(elapsed)} so far" + (f", {self.detail}" if self.detail else "")
        done = _amount(self.n, self.unit, self.binary)
        parts = [done]
        if self.total:
            parts = [
                f"{_amount(self.n, '', self.binary)} of {_amount(self.total, self.unit, self.binary)} "
                f"({100 * self.n / self.total:.0f}%)"
            ]
        if elapsed > 0 and self.n:
            parts.append(self._rate(self.n / elapsed))
            if self.total and self.total > self.n:
                parts.append(f"{duration((self.total - self.n) * elapsed / self.n)} left")
        if self.detail:
            parts.append(self.detail)
        return ", ".join(parts)

    def _line(self, text: str) -> None:
        self._last_line = self.clock()
        print(f"citewise: {self.label}: {text}", file=self.stream, flush=True)


class Heartbeat:
    """Beats a :class:`Phase` from a thread every ``every`` seconds, from ``after`` seconds on,
    until stopped: for a step of minutes inside a library call that reports nothing (building the
    nearest-neighbour graph). A step done within ``after`` shows nothing at all."""

    def __init__(self, phase: Phase, after: float = 1.0, every: float = 1.0) -> None:
        self.phase = phase
        self.after, self.every = after, every
        self._stop = threading.Event()
        self._since: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"progress: {phase.label}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def start(self) -> None:
        """The step begins: beats from ``after`` seconds on (none with ``-q``)."""
        self._since = self.phase.clock()
        if not self.phase.disabled and not self._thread.is_alive():
            self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """No more beats; the phase is closed (its closing line, if it was shown)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.phase.close()

    def _run(self) -> None:
        if self._stop.wait(self.after):
            return
        while not self._stop.is_set():
            self.phase.beat(self._since)
            self._stop.wait(self.every)
