"""Ray Core execution of sweep runs: one remote task per run.

:func:`connect` starts a local Ray instance on demand or joins one (``address``, or one already
started in this process) and says whether it started it. :func:`run_tasks` submits at most
``workers`` runs at a time (``threads`` CPUs each, one GPU where there are), calls
``on_done(item, outcome)`` as each finishes; a task that raises or loses its worker becomes an
outcome with ``exit_code None`` and its error's first line (``max_retries=0``).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, Sequence

from crosscurv.experiments.sweep.spec import SweepError

__all__ = ["check_address", "connect", "cluster_gpus", "run_tasks", "RayStart"]

#: object store of a local instance: runs return small dicts only
_OBJECT_STORE_BYTES = 200 * 1024 * 1024


class RayStart:
    """How :func:`connect` found Ray: ``started`` (by this call), ``seconds`` it took,
    ``resources``.
    """

    def __init__(self, started: bool, seconds: float, resources: dict):
        self.started, self.seconds, self.resources = started, seconds, resources


def check_address(address: str, timeout: float = 5.0) -> None:
    """:class:`SweepError` unless ``address`` is ``auto`` or a ``HOST:PORT`` that accepts a TCP
    connection.

    ``ray.init`` retries an unreachable address for minutes; this fails in seconds.
    """
    import socket

    if address == "auto":
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or address.startswith("ray://"):
        raise SweepError(f"--address must be auto or HOST:PORT of a Ray head node, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise SweepError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def connect(num_cpus: int, address: str | None = None) -> RayStart:
    """Use the Ray instance of this process, join ``address``, or start a local one with
    ``num_cpus`` CPUs."""
    if address:
        check_address(address)
    import ray

    t0 = time.perf_counter()
    if ray.is_initialized():
        return RayStart(False, 0.0, dict(ray.cluster_resources()))
    kw = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
              configure_logging=True)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # a local instance's workers run the sweep's runs at the driver's priority (Ray's default
    # niceness 15 starves them beside any other busy process on the machine); read by the raylet
    # this call starts
    os.environ.setdefault("RAY_worker_niceness", "0")
    try:
        if address:
            # workers import crosscurv as this driver does: where the cluster shares this file
            # system, from the same folder; elsewhere crosscurv must be installed on every node
            code_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            path = os.pathsep.join(p for p in (code_root, os.environ.get("PYTHONPATH", "")) if p)
            ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, **kw)
        else:
            # "local": always a new instance, never a cluster that `ray start` left on this machine
            ray.init(address="local", num_cpus=int(num_cpus),
                     object_store_memory=_OBJECT_STORE_BYTES, **kw)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = f"join the Ray cluster at {address}" if address else "start a local Ray instance"
        raise SweepError(f"cannot {where}: "
                         f"{(str(exc).strip().splitlines() or [type(exc).__name__])[0]}") from None
    return RayStart(True, time.perf_counter() - t0, dict(ray.cluster_resources()))


def cluster_gpus() -> float:
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # RayTaskError wraps the remote traceback; its last line names the cause
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    cause = lines[-1] if lines else ""
    return f"{type(exc).__name__}: {cause}"[:300]


def run_tasks(items: Sequence, make_call: Callable, workers: int, threads: int,
              on_done: Callable[[object, dict], None]) -> None:
    """Run :func:`crosscurv.experiments.sweep.worker.execute_run` with the arguments
    ``make_call(item)`` as Ray tasks, ``workers`` at a time.

    On ``KeyboardInterrupt`` the runs in flight are cancelled (their folders keep a checkpoint, so a
    rerun resumes them) and the interrupt propagates.
    """
    import ray

    from crosscurv.experiments.sweep.worker import execute_run

    gpus = 1 if cluster_gpus() > 0 else 0
    remote = ray.remote(execute_run).options(num_cpus=threads, num_gpus=gpus, max_retries=0,
                                             retry_exceptions=False)
    queue = list(items)
    pending: dict = {}
    try:
        while queue or pending:
            while queue and len(pending) < workers:
                item = queue.pop(0)
                args = make_call(item)
                pending[remote.remote(*args)] = item
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                item = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as exc:  # the task raised or its worker died: report it, go on
                    outcome = {"exit_code": None, "error": _first_line(exc), "seconds": None}
                on_done(item, outcome)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
