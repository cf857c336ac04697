"""A dependency-free progress bar on stderr (redrawn at most 5 times a second)."""

from __future__ import annotations

import sys
import time
from typing import IO


class Progress:
    """``Progress(total, label)``; call :meth:`update` with increments, :meth:`close` at the end.

    Draws ``label [#####-----] 52% 1.2 s`` in place when ``enabled`` (default: stderr is
    a terminal); otherwise prints nothing. ``unit="B"`` shows MB instead of counts; bytes
    passed to :meth:`update` add a MB/s rate.
    """

    def __init__(
        self, total: float, label: str, *, enabled: bool | None = None, unit: str = "", stream: IO[str] | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.label, self.unit = max(float(total), 1.0), label, unit
        self.done = 0.0
        self.bytes = 0.0
        self.start = self._last = time.perf_counter()
        self._drawn = False

    def update(self, n: float = 1.0, *, nbytes: float = 0.0) -> None:
        """Advance by ``n`` items; ``nbytes`` read with them (shown as MB/s)."""
        self.done += n
        self.bytes += nbytes
        now = time.perf_counter()
        if self.enabled and (now - self._last >= 0.2 or self.done >= self.total):
            self._last = now
            self._draw(now)

    def set_label(self, label: str) -> None:
        self.label = label

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        count = (
            f"{self.done / 1e6:.0f}/{self.total / 1e6:.0f} MB"
            if self.unit == "B"
            else f"{self.done:.0f}/{self.total:.0f}"
        )
        rate = f" {self.bytes / 1e6 / max(now - self.start, 1e-9):.0f} MB/s" if self.bytes else ""
        self.stream.write(f"\r{self.label} [{bar}] {100 * frac:3.0f}% {count}{rate} {now - self.start:.1f} s ")
        self.stream.flush()
        self._drawn = True

    def close(self) -> float:
        """Finish the bar (newline) and return the elapsed seconds."""
        now = time.perf_counter()
        if self.enabled:
            self._draw(now)
            self.stream.write("\n")
            self.stream.flush()
        return now - self.start
