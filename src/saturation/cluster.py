"""Run independent, seeded tasks on dask.distributed (or in this process).

Shared by ``saturation calibrate`` (one task per simulation) and ``saturation report
--scheduler`` (one task per analysis). Every task ends in exactly one of the returned
lists: results (in task order) or failures (label and error), after two retries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: retries of a failed task before it is reported as failed
RETRIES = 2


def map_tasks(
    func: Callable[[Any], Any],
    tasks: Sequence[Any],
    labels: Sequence[str],
    *,
    scheduler: str | None = None,
    workers: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Any], list[dict[str, str]]]:
    """Apply ``func`` to every task.

    ``scheduler``: None starts a LocalCluster with ``workers`` single-threaded worker
    processes; ``"tcp://host:port"`` uses an existing cluster (its workers need saturation
    installed); ``"sync"`` runs in this process without dask (debugging). Returns
    ``(results, failures)``: results of the tasks that succeeded, in task order, and one
    ``{"task": label, "error": repr}`` per task that failed after :data:`RETRIES` retries.
    """
    if len(labels) != len(tasks) or len(set(labels)) != len(labels):
        raise ValueError("every task needs a unique label")
    results: dict[int, Any] = {}
    failures: list[dict[str, str]] = []
    if scheduler == "sync":
        for i, task in enumerate(tasks):
            try:
                results[i] = func(task)
            except Exception as exc:  # reported as a failed task, not swallowed
                failures.append({"task": labels[i], "error": repr(exc)})
            if progress:
                progress(i + 1, len(tasks))
        return [results[i] for i in sorted(results)], failures
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        # no dashboard, and the scheduler's HTTP endpoint on a free port: with the default it
        # binds 8787 even without a dashboard, and a second cluster on the machine (another
        # calibration, a test) then starts with a port-in-use warning
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"},
        )
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        futures = client.map(func, list(tasks), key=list(labels), retries=RETRIES, pure=False)
        index = {label: i for i, label in enumerate(labels)}
        for done, fut in enumerate(as_completed(futures), start=1):
            if fut.status == "error":
                failures.append({"task": str(fut.key), "error": repr(fut.exception())})
            else:
                results[index[fut.key]] = fut.result()
            if progress:
                progress(done, len(tasks))
        return [results[i] for i in sorted(results)], failures
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
