"""The kernels of later analyses compiled in a second process (models.ahead)."""

from __future__ import annotations

import time

from saturation.models.ahead import CompileAhead


def test_waits_for_each_module_in_order_and_stops_the_process():
    with CompileAhead(["json", "saturation.schema"]) as ahead:
        proc = ahead._proc
        assert proc is not None
        ahead.wait_for(["json"])
        assert "json" in ahead.done
        ahead.wait_for(["saturation.schema", "a.module.it.does.not.import"])
        assert ahead.done == {"json", "saturation.schema"}
    assert proc.returncode is not None  # reaped when the block ends


def test_a_failing_import_only_ends_the_waiting():
    with CompileAhead(["no_such_module_here", "json"]) as ahead:
        start = time.perf_counter()
        ahead.wait_for(["json"])  # never printed: the process ended at the first module
        assert time.perf_counter() - start < 30
        assert ahead.done == set()
        assert ahead._proc is None  # closed when it ended
        ahead.wait_for(["json"])  # and returns at once after that


def test_nothing_to_compile_starts_nothing():
    ahead = CompileAhead([])
    assert ahead._proc is None
    ahead.wait_for(["saturation.models.transfer_kernel"])
    ahead.close()
    ahead.close()


def test_a_process_still_running_is_stopped():
    ahead = CompileAhead(["saturation.models.transfer_kernel"])  # compiles or loads: seconds either way
    proc = ahead._proc
    ahead.close()
    assert proc is not None and proc.returncode is not None
