"""Compile the numba kernels of later analyses in a second process while the first ones run.

The hand-written kernels (:mod:`saturation.models.transfer_kernel`,
:mod:`saturation.models.sigmoid_kernel`, :mod:`saturation.models.pass_at_k_kernel`) are
compiled once per machine and loaded from numba's on-disk cache after that. The first
report on a machine compiles the ones it uses (about 11 CPU-s, 9.5 s of it the transfer kernel) while
its first analyses run on one core. numba's compiler holds the GIL, so a thread does not
help (the first sections slowed down as much as the compile saved); a second process does:
it imports the modules in the order the analyses will need them, which compiles them into
the cache (written atomically by numba), and prints each module's name when it is done. The
analysis that needs a module waits for that line (:meth:`CompileAhead.wait_for`) and then
imports the module from the cache. On a machine whose cache is warm the second process only
loads the kernels (about 1 CPU-s on the otherwise idle core). Nothing here imports numba.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

#: what the second process runs: import each module named on its command line, in order,
#: printing the name once the module is imported (compiled into numba's cache)
_PROGRAM = (
    "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n    print(name, flush=True)\n"
)


class CompileAhead:
    """A second Python process importing ``modules`` in order (see the module docstring).

    Parameters
    ----------
    modules : sequence of str
        Module names in the order they will be needed; nothing is started when empty.

    Notes
    -----
    Any failure of the second process (it cannot start, a module fails to import, it is
    killed) only means the analysis imports the module itself, as without this. Use as a
    context manager, or call :meth:`close`: the process is stopped when the caller is done.
    """

    def __init__(self, modules: Sequence[str]) -> None:
        self.modules = list(dict.fromkeys(modules))
        self.done: set[str] = set()
        self._proc: subprocess.Popen[str] | None = None
        if not self.modules:
            return
        # the same modules as this process would import: its search path, not the working
        # directory's (``-P``)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-c", _PROGRAM, *self.modules],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError:  # no second interpreter here: every module is imported where it is used
            self._proc = None

    def wait_for(self, modules: Sequence[str]) -> None:
        """Block until every one of ``modules`` that the second process imports is imported
        there (or the process has ended); modules it does not import return at once."""
        wanted = [m for m in modules if m in self.modules and m not in self.done]
        proc = self._proc
        if not wanted or proc is None or proc.stdout is None:
            return
        while any(m not in self.done for m in wanted):
            try:
                line = proc.stdout.readline()
            except (OSError, ValueError):  # an unreadable pipe is the process's failure, not the caller's
                line = ""
            if not line:  # it ended (a failure included): the caller imports what is left itself
                self.close()
                return
            self.done.add(line.strip())

    def close(self) -> None:
        """Stop the second process if it is still running and reap it (numba writes each
        cache file under a temporary name and renames it into place, so a compile cut short
        leaves no partial cache entry)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> CompileAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
