"""Progress of long work on stderr: a live ``rich`` display on a terminal, plain lines elsewhere.

One :class:`Progress` is the display of one piece of long work (a report, an ingest, a
calibration): a main count (analyses, files, simulations), the item being worked on and
its stage (``load``, ``compile``, ``sample`` with draws/s and ETA, ``figures``). Code deep
in the stack reports its stage through the module functions :func:`stage` and
:func:`advance` without being handed the display: they act on the innermost open display
and do nothing when there is none.

On a terminal the display is a ``rich`` live view redrawn in place, and :meth:`Progress.log`
prints above it (log lines and the bar never share a line). When stderr is not a terminal
(CI, ``2> log``), it prints a plain line when an item starts and a status line every
``interval`` seconds while one runs, so a redirected run still shows where it is.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import IO, Any

#: seconds between plain status lines when stderr is not a terminal
INTERVAL = 10.0

_STACK: list[Progress] = []
_CONTROL_RE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def terminal_text(text: str) -> str:
    """``text`` safe for a terminal: every control character but the newline (ESC, CR, BEL,
    ...) shown escaped (``\\x1b``), so a run name cannot move the cursor, recolour or retitle
    the terminal, or overwrite an earlier line. The live display also shows names without
    rich markup (a ``[bold]`` in a name stays as written)."""
    return _CONTROL_RE.sub(lambda m: repr(m.group(0))[1:-1], text)


_STACK_LOCK = threading.Lock()


def current() -> Progress | None:
    """The innermost open display, or None."""
    with _STACK_LOCK:
        return _STACK[-1] if _STACK else None


def stage(name: str, *, total: float | None = None, unit: str = "") -> None:
    """Set the current item's stage on the innermost display (no-op without one).

    ``total`` (e.g. draws) makes the stage a counted one: :func:`advance` reports how far
    it has come, and the display shows the rate and the time remaining."""
    p = current()
    if p is not None:
        p.stage(name, total=total, unit=unit)


def advance(done: float, *, note: str = "") -> None:
    """Report ``done`` (absolute) units of the current stage (no-op without a display)."""
    p = current()
    if p is not None:
        p.advance(done, note=note)


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class Progress:
    """``Progress(total, label)``: the display of one piece of long work.

    Parameters
    ----------
    total : float
        Number of items of the main count (analyses, files, simulations).
    label : str
        What the work is ("report", "ingest").
    enabled : bool, optional
        False prints nothing. None or True: a live display on a terminal, plain lines
        otherwise.
    stream : file, optional
        Where to write (default ``sys.stderr``).
    interval : float
        Seconds between plain status lines (not a terminal).

    Notes
    -----
    Use it as a context manager (or call :meth:`close`): while open it is the display that
    :func:`stage` and :func:`advance` act on. Thread-safe: the sampler reports draws from
    its own thread.
    """

    def __init__(
        self,
        total: float,
        label: str,
        *,
        enabled: bool | None = None,
        stream: IO[str] | None = None,
        interval: float = INTERVAL,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled is not False
        self.live = self.enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.label, self.interval = max(float(total), 1.0), terminal_text(label), interval
        self.done = 0.0
        self.bytes = 0.0
        self.item = ""
        self.stage_name = ""
        self.stage_total: float | None = None
        self.stage_unit = ""
        self.stage_done = 0.0
        self.stage_note = ""
        self.start = self._stage_start = time.perf_counter()
        self._lock = threading.RLock()
        self._closed = False
        self._last_line = -float("inf")
        self._stop = threading.Event()
        self._rich: Any = None
        if self.live:
            self._start_rich()
        elif self.enabled and interval > 0:
            self._ticker = threading.Thread(target=self._tick, name="saturation-progress", daemon=True)
            self._ticker.start()
        with _STACK_LOCK:
            _STACK.append(self)

    # -------------------------------------------------------------- public
    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: float = 1.0, *, nbytes: float = 0.0) -> None:
        """Advance the main count by ``n`` items (``nbytes`` read with them: shown as MB and
        MB/s)."""
        with self._lock:
            self.done += n
            self.bytes += nbytes
            self._refresh()

    def set_item(self, item: str) -> None:
        """The item being worked on; resets the stage. Plain mode prints a line for it."""
        with self._lock:
            item = terminal_text(item)
            changed = item != self.item
            self.item = item
            self.stage_name, self.stage_total, self.stage_done, self.stage_note = "", None, 0.0, ""
            self._stage_start = time.perf_counter()
            # plain mode: a line per new item, but not more than one every 2 s (an ingest
            # goes through thousands of files; the periodic status line covers the rest)
            if changed and not self.live and self.enabled and time.perf_counter() - self._last_line >= 2.0:
                self._line(self.status())
            self._refresh(force=True)

    def stage(self, name: str, *, total: float | None = None, unit: str = "") -> None:
        """The current item's stage; ``total``: a counted stage (see :meth:`advance`)."""
        with self._lock:
            self.stage_name, self.stage_total, self.stage_unit = terminal_text(name), total, terminal_text(unit)
            self.stage_done, self.stage_note = 0.0, ""
            self._stage_start = time.perf_counter()
            if self._rich is not None:
                self._rich.reset(self._sub, total=total, completed=0)  # the stage's own clock
            self._refresh(force=True)

    def advance(self, done: float, *, note: str = "") -> None:
        """``done`` units of the current counted stage so far (absolute, not an increment)."""
        with self._lock:
            self.stage_done = float(done)
            self.stage_note = terminal_text(note)
            self._refresh()

    def log(self, text: str) -> None:
        """A line above the live display (or a plain line); always printed when enabled."""
        if not self.enabled:
            return
        text = terminal_text(text)
        with self._lock:
            if self._rich is not None:
                self._rich.console.print(text, highlight=False, markup=False, soft_wrap=True)
            else:
                self._line(text)

    def status(self) -> str:
        """One line: main count, elapsed time, the item and its stage with rate and ETA."""
        now = time.perf_counter()
        count = f" {self.done:.0f}/{self.total:.0f}" if self.total > 1 else ""  # one fit: no "0/1"
        parts = [f"{self.label}{count}", f"[{_seconds(now - self.start)}]"]
        if self.bytes:
            parts.append(f"{self.bytes / 1e6:.0f} MB, {self.bytes / 1e6 / max(now - self.start, 1e-9):.0f} MB/s")
        if self.item:
            parts.append(self.item + (":" if self.stage_name else ""))
        if self.stage_name:
            parts.append(self._stage_text(now))
        return " ".join(parts)

    def close(self) -> float:
        """Finish the display; returns the elapsed seconds."""
        elapsed = time.perf_counter() - self.start
        with self._lock:
            if self._closed:
                return elapsed
            self._closed = True
            self._stop.set()
            if self._rich is not None:
                self._rich.update(self._main, completed=self.done, description=self._main_text())
                self._rich.update(self._sub, visible=False)
                self._rich.stop()
            elif self.enabled:
                self._line(f"{self.label}: {self.done:.0f}/{self.total:.0f} done in {_seconds(elapsed)}")
        with _STACK_LOCK:
            if self in _STACK:
                _STACK.remove(self)
        return elapsed

    # -------------------------------------------------------------- internals
    def _stage_text(self, now: float, *, counts: bool = True) -> str:
        """``sample 1200/5200 draws, 310 draws/s, ETA 13 s, 0 divergences`` (``counts=False``:
        without the name and the count, which the live bar shows itself)."""
        parts = []
        took = now - self._stage_start
        unit = f" {self.stage_unit}" if self.stage_unit else ""
        if self.stage_total:
            if counts:
                parts.append(f"{self.stage_name} {self.stage_done:.0f}/{self.stage_total:.0f}{unit}")
            if self.stage_done > 0 and took > 0:
                rate = self.stage_done / took
                parts += [f"{rate:.0f}{unit}/s", f"ETA {_seconds((self.stage_total - self.stage_done) / rate)}"]
        else:
            parts.append(f"{self.stage_name} ({_seconds(took)})" if counts else _seconds(took))
        if self.stage_note:
            parts.append(self.stage_note)
        return ", ".join(parts)

    def _main_text(self) -> str:
        return f"{self.label}" + (f" ({self.bytes / 1e6:.0f} MB)" if self.bytes else "")

    def _line(self, text: str) -> None:
        self._last_line = time.perf_counter()
        self.stream.write(text + "\n")
        self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if not self._closed:
                    self._line(self.status())

    def _start_rich(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=self.stream)
        self._rich = RichProgress(
            TextColumn("{task.description}", markup=False),  # names from data are never markup
            BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}", markup=False),  # "3/5", "1200/5200 draws"; "" uncounted
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}", markup=False),
            console=console,
            refresh_per_second=4,
            transient=False,
        )
        self._main = self._rich.add_task(self._main_text(), total=self.total, info="", count="")
        self._sub = self._rich.add_task("", total=None, info="", count="", visible=False)
        self._rich.start()

    def _refresh(self, *, force: bool = False) -> None:
        """Update the live view (``force``: redraw at once, for item and stage changes; counts
        are redrawn by rich's own 4-per-second refresh)."""
        if self._rich is None:
            return
        now = time.perf_counter()
        self._rich.update(
            self._main,
            completed=self.done,
            description=self._main_text(),
            info=self.item,
            count=f"{self.done:.0f}/{self.total:.0f}",
        )
        if self.stage_name:
            counted = bool(self.stage_total)
            unit = f" {self.stage_unit}" if self.stage_unit else ""
            self._rich.update(
                self._sub,
                visible=True,
                description=f"  {self.stage_name}",
                total=self.stage_total,
                completed=self.stage_done,
                count=f"{self.stage_done:.0f}/{self.stage_total:.0f}{unit}" if counted else "",
                info=self._stage_text(now, counts=False) if counted or self.stage_note else "",
            )
        else:
            self._rich.update(self._sub, visible=False)
        if force:
            self._rich.refresh()
