"""Text streams over plain or zstandard-compressed files, with bounded memory.

One home for reading input files: :func:`open_text` decompresses incrementally and
reports a truncated or corrupt stream instead of returning the partial data as if it were
whole; :func:`read_all` reads a file whole up to a limit on the *decompressed* size (so a
small compressed bomb cannot fill memory); :func:`iter_lines` streams lines with a bound
on the line length. The limits default to :data:`MAX_FILE_BYTES` / :data:`MAX_LINE_CHARS`
and can be raised with the environment variables ``SATURATION_MAX_FILE_BYTES`` /
``SATURATION_MAX_LINE_CHARS``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip().isdigit() else default


#: decompressed size above which a table file is refused (64 GiB)
MAX_FILE_BYTES = env_int("SATURATION_MAX_FILE_BYTES", 64 << 30)
#: a line longer than this many characters is not kept (16 Mi characters)
MAX_LINE_CHARS = env_int("SATURATION_MAX_LINE_CHARS", 16 << 20)
#: columns a table (trials or per-step metrics) may have: 4,096 unless
#: ``SATURATION_MAX_COLUMNS`` sets it (a 10,000-column header is refused up front)
MAX_COLUMNS = env_int("SATURATION_MAX_COLUMNS", 4096)
#: what :func:`iter_lines` yields in place of an overlong line
OVERLONG = "\x00<overlong line>"


def too_many_columns(width: int) -> str:
    """Why a table of ``width`` columns is refused: the one message of the column limit
    (trial tables, per-step metrics tables; "" when it is within the limit)."""
    if width <= MAX_COLUMNS:
        return ""
    return f"{width:,} columns, more than the limit of {MAX_COLUMNS:,} (raise it with SATURATION_MAX_COLUMNS)"


def admit_keys(seen: set[str], keys: Iterable[str]) -> str:
    """A JSON Lines record's keys become columns, bounded as a CSV header is: add ``keys`` to
    ``seen`` and return "", or, when they would take the table past :data:`MAX_COLUMNS`
    columns, leave ``seen`` as it is and return why."""
    keys = list(keys)
    new = set(keys) - seen
    if len(seen) + len(new) > MAX_COLUMNS:
        return (
            f"{len(keys):,} keys, {len(new):,} of them new: more than the limit of {MAX_COLUMNS:,} columns "
            "(raise it with SATURATION_MAX_COLUMNS)"
        )
    seen |= new
    return ""


class TooLargeError(ValueError):
    """A file decompresses to more than the limit."""


class TruncatedStreamError(ValueError):
    """A zstandard stream ends inside a frame (or is corrupt)."""


class _ZstdRaw(io.RawIOBase):
    """Streaming zstandard decompression (any number of frames) that raises
    :class:`TruncatedStreamError` when the input ends inside a frame, instead of
    returning the partial data as if the file were complete."""

    def __init__(self, fileobj: IO[bytes], name: str) -> None:
        import zstandard

        self._zstd = zstandard
        self._f, self._name = fileobj, name
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._buf = b""
        self._pos = 0
        self._in_frame = False
        self._truncated = False
        self._in, self._in_pos, self._piece = b"", 0, self.MIN_PIECE

    def readable(self) -> bool:
        return True

    #: compressed bytes fed to the decompressor per call: small at first and after a call
    #: that expanded a lot (zstd expands up to ~32,000x, so a small bomb yields at most a
    #: few tens of MB per call), growing while the output stays moderate
    MIN_PIECE, MAX_PIECE, BIG_OUTPUT = 1 << 10, 1 << 18, 1 << 23

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            if self._in_pos >= len(self._in):
                self._in, self._in_pos = self._f.read(1 << 20), 0
            if not self._in:
                if self._in_frame:
                    if self._truncated:
                        raise TruncatedStreamError(f"{self._name}: truncated zstd stream (the last frame has no end)")
                    # first report end-of-data, so the reader gets everything decompressed so
                    # far (TextIOWrapper drops a partial read when an error is raised); the
                    # next read raises
                    self._truncated = True
                return 0
            data = self._in[self._in_pos : self._in_pos + self._piece]
            self._in_pos += len(data)
            out = []
            while data:
                try:
                    out.append(self._d.decompress(data))
                except self._zstd.ZstdError as exc:
                    raise TruncatedStreamError(f"{self._name}: corrupt zstd stream ({exc})") from exc
                self._in_frame = not self._d.eof
                data = self._d.unused_data if self._d.eof else b""
                if self._d.eof:
                    self._d = self._zstd.ZstdDecompressor().decompressobj()
            self._buf, self._pos = b"".join(out), 0
            if len(self._buf) > self.BIG_OUTPUT:
                self._piece = self.MIN_PIECE
            elif len(self._buf) < self.BIG_OUTPUT // 4:
                self._piece = min(self._piece * 2, self.MAX_PIECE)
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def open_text(path: str | Path, newline: str | None = None) -> IO[str]:
    """A text stream over a plain or zstandard-compressed file (decoded as UTF-8, invalid
    bytes replaced), read incrementally. A truncated ``.zst`` first ends like a complete
    file, then raises :class:`TruncatedStreamError` on the next read (so read once more
    after end-of-file, as :func:`read_all` does); a corrupt one raises where it is damaged.
    ``newline`` as for :func:`open` (``""``: carriage returns kept as read)."""
    path = Path(path)
    raw: Any = open(path, "rb")  # noqa: SIM115 - closed by the TextIOWrapper
    if path.suffix == ".zst":
        # unbuffered on purpose: a BufferedReader would discard the data read before the
        # truncation error
        raw = _ZstdRaw(raw, str(path))
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=newline)


def read_all(path: str | Path, limit: int | None = None) -> str:
    """The whole text of a plain or ``.zst`` file; raises :class:`TruncatedStreamError`
    for a truncated stream and :class:`TooLargeError` when it decompresses to more than
    ``limit`` characters (read at most ``limit + 1``: a small bomb never fills memory)."""
    with open_text(path) as stream:
        text = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(text) > limit:
            raise TooLargeError(f"{path}: decompresses to more than {limit:,} characters (the limit)")
        stream.read(1)  # a truncated stream raises here
    return text


#: characters of text per block of :func:`iter_line_blocks` (memory is a few blocks)
BLOCK_CHARS = 1 << 23


def iter_line_blocks(
    path: str | Path,
    *,
    block_chars: int | None = None,
    max_line: int | None = None,
    limit: int | None = None,
) -> Iterator[tuple[int, str]]:
    """``(number of the first line, text)`` of a plain or ``.zst`` text file in blocks of
    whole lines, streamed (memory bounded by a block and one line).

    ``text`` holds complete lines, each ending in ``"\\n"`` (the file's last line may not),
    carriage returns kept as read; a line longer than ``max_line`` characters (default
    :data:`MAX_LINE_CHARS`, carriage return included) is yielded alone as
    :data:`OVERLONG` (its text dropped). Past ``limit`` characters in all (default
    :data:`MAX_FILE_BYTES`) it raises :class:`TooLargeError`; after the last line of a
    truncated stream (its partial last line included) :class:`TruncatedStreamError`.
    :func:`iter_lines` is this, a line at a time. ``block_chars`` defaults to
    :data:`BLOCK_CHARS`, read when called."""
    block_chars = BLOCK_CHARS if block_chars is None else block_chars
    max_line = MAX_LINE_CHARS if max_line is None else max_line
    limit = MAX_FILE_BYTES if limit is None else limit
    total, number, pending, overlong = 0, 1, "", False
    with open_text(path, newline="") as stream:
        while True:
            try:
                chunk = stream.read(block_chars)
                if not chunk:
                    stream.read(1)  # a truncated stream raises here
            except TruncatedStreamError:
                if pending:  # the partial line before the damage is handed over too (and counted)
                    yield number, pending
                raise
            total += len(chunk)
            if total > limit:
                raise TooLargeError(
                    f"{path}: decompresses to more than {limit:,} characters (the limit; "
                    "raise it with SATURATION_MAX_FILE_BYTES)"
                )
            if not chunk:
                if pending or overlong:
                    yield number, OVERLONG if overlong else pending
                return
            if overlong:  # skip to the end of the overlong line
                cut = chunk.find("\n")
                if cut < 0:
                    continue
                yield number, OVERLONG
                number, overlong, chunk = number + 1, False, chunk[cut + 1 :]
            text = pending + chunk
            cut = text.rfind("\n") + 1
            block, pending = text[:cut], text[cut:]
            if len(block) > max_line:  # only then can a line in it be too long
                for line in block.split("\n")[:-1]:
                    yield number, OVERLONG if len(line) > max_line else line + "\n"
                    number += 1
            elif block:
                yield number, block
                number += block.count("\n")
            if len(pending) > max_line:
                pending, overlong = "", True


def iter_lines(
    path: str | Path,
    *,
    max_line: int | None = None,
    limit: int | None = None,
) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a plain or ``.zst`` text file, streamed (memory bounded by
    a block of lines, :func:`iter_line_blocks`); the newline and a carriage return before it
    are removed. Past ``limit`` characters in all (default :data:`MAX_FILE_BYTES`) it raises
    :class:`TooLargeError`; a line longer than ``max_line`` characters (default
    :data:`MAX_LINE_CHARS`) is yielded as :data:`OVERLONG`
    (its text dropped) so the caller can count and report it. Raises
    :class:`TruncatedStreamError` after the last line of a truncated stream (its partial
    last line included)."""
    for first, block in iter_line_blocks(path, max_line=max_line, limit=limit):
        if block is OVERLONG:
            yield first, OVERLONG
            continue
        lines = block.split("\n")
        if block.endswith("\n"):
            lines.pop()
        for k, line in enumerate(lines):
            yield first + k, line.removesuffix("\r")
