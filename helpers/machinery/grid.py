"""The grid runner: a chapter's heavy runs (`experiments.<chapter>.runs(p)`, a list of `results.RunSpec` — the
runs its `run(p)` iterates) made as submitit jobs, on this machine or on a SLURM cluster. Each job makes one
run with `results.execute` (under the run's lock; a run another process holds is skipped); the runs, the lock,
`MissingRuns` and the cache are `helpers.machinery.results`' and are re-exported here.

`scripts/grid.py` (`make grid CHAPTER=… SCALE=…`) submits every run of `experiments.<chapter>.runs(p)` that is
not in the cache as a submitit job (locally, or on SLURM) and waits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .results import MissingRuns, RunLocked, RunSpec, execute, execute_all, run_lock, variant_runs, variant_specs


def job(spec: RunSpec) -> dict[str, Any]:
    """What one grid job runs (in its own process): the run under its lock, skipped if another process
    holds it. Returns a small report for the runner."""
    import torch

    torch.set_num_threads(int(os.environ.get("TOKUNI_JOB_THREADS", "1")))
    t = time.time()
    try:
        _, hit = execute(spec, train_missing=True, wait=False)
    except RunLocked as err:
        return {"name": spec.name, "status": "skipped", "message": str(err), "seconds": time.time() - t}
    return {"name": spec.name, "status": "cached" if hit else "done", "seconds": time.time() - t}


__all__ = ["RunSpec", "MissingRuns", "RunLocked", "run_lock", "execute", "execute_all", "variant_specs",
           "variant_runs", "job"]


# --- the runner: submitit jobs, locally or on SLURM -----------------------------------------------------


def executor(cluster: str, folder: str | os.PathLike, *, timeout_min: int = 24 * 60, gpus_per_job: int = 0,
             cpus_per_job: int = 1, partition: str | None = None, array_parallelism: int = 64,
             slurm_args: dict[str, Any] | None = None):
    """A submitit executor: `local` (one process per job on this machine), `slurm` (an sbatch array; jobs write
    the cache on the shared file system), or `debug` (in this process, for tests)."""
    import submitit

    if cluster == "local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=timeout_min, gpus_per_node=gpus_per_job, cpus_per_task=cpus_per_job)
    elif cluster == "slurm":
        ex = submitit.SlurmExecutor(folder=folder)
        ex.update_parameters(time=timeout_min, gpus_per_node=gpus_per_job, cpus_per_task=cpus_per_job,
                             array_parallelism=array_parallelism, **({"partition": partition} if partition else {}),
                             **(slurm_args or {}))
    elif cluster == "debug":
        ex = submitit.DebugExecutor(folder=folder)
    else:
        raise ValueError(f"cluster {cluster!r}: use 'local', 'slurm' or 'debug'")
    return ex


def _job_on_gpu(spec: RunSpec, gpu: int | None) -> dict[str, Any]:
    """A local job pinned to one GPU (`CUDA_VISIBLE_DEVICES`, set before CUDA starts in the job's process)."""
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return job(spec)


@dataclass
class GridReport:
    """What a grid run did: per run name, its status (cached before, done, skipped: locked by another process,
    failed) and seconds; failures with their messages."""

    statuses: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0

    def count(self, status: str) -> int:
        return sum(s == status for s in self.statuses.values())


def jobs_per_gpu_by_memory(gib_per_job: float, gpus: list[int], reserve_gib: float = 4.0) -> int:
    """How many jobs of `gib_per_job` GiB (a run's peak, e.g. from `scripts/bench_gpu.py`) fit on the smallest
    of `gpus`, keeping `reserve_gib` free for each process's CUDA context and the allocator's slack."""
    import torch

    if gib_per_job <= 0:
        raise ValueError(f"gib_per_job must be positive, got {gib_per_job}")
    if not torch.cuda.is_available():
        raise RuntimeError("packing by memory needs CUDA: give --jobs-per-gpu instead")
    total = min(torch.cuda.get_device_properties(g).total_memory for g in gpus) / 2**30
    return max(1, int((total - reserve_gib) // gib_per_job))


def gpu_slots(gpus: list[int], jobs_per_gpu: int = 1) -> list[int]:
    """One entry per job that may run at once: each GPU `jobs_per_gpu` times, the GPUs taken in turn (a
    second job goes onto a card only when every card has one)."""
    if jobs_per_gpu < 1:
        raise ValueError(f"jobs_per_gpu must be >= 1, got {jobs_per_gpu}")
    return [g for _ in range(jobs_per_gpu) for g in gpus]


def run_grid(specs: list[RunSpec], ex, parallel: int = 2, gpus: list[int] | None = None, poll_s: float = 1.0,
             report: Callable[[str], None] = print, jobs_per_gpu: int = 1) -> GridReport:
    """Submit every spec the cache lacks as a job of executor `ex` and wait, at most `parallel` at a time
    locally (with `gpus`: `jobs_per_gpu` processes on each of them, each pinned to its card); on SLURM one
    array, throttled by the cluster. Re-running skips finished runs; a killed run resumes from its checkpoint;
    a run another process holds is skipped. Packing changes no result: each job is its own process with its
    own seeds, and a run's numbers do not depend on what else shares its card."""
    out = GridReport()
    t0 = time.time()
    todo = []
    for s in specs:
        if s.done():
            out.statuses[s.name] = "cached"
        else:
            todo.append(s)
    report(f"{len(specs)} runs: {len(specs) - len(todo)} in the cache, {len(todo)} to make")

    def finished(spec: RunSpec, j) -> None:
        try:
            r = j.result()
            out.statuses[spec.name], out.seconds[spec.name] = r["status"], r["seconds"]
            if r["status"] == "skipped":
                report(f"  skipped {spec.name}: {r['message']}")
        except Exception as err:  # noqa: BLE001 — a failed job is reported, the others go on
            out.statuses[spec.name] = "failed"
            out.failures[spec.name] = str(err).strip().splitlines()[-1] if str(err).strip() else repr(err)
            report(f"  FAILED {spec.name}: {out.failures[spec.name]}")

    def line() -> str:
        done = sum(out.statuses.get(s.name) in ("done", "skipped") for s in todo)
        failed = sum(out.statuses.get(s.name) == "failed" for s in todo)
        text = f"[{time.time() - t0:7.0f} s] done {done}/{len(todo)}, running {len(running)}, failed {failed}"
        if gpus and running:
            per = {g: sum(gp == g for _, _, gp in running) for g in gpus}
            text += (" (sharing each GPU: " + ", ".join(f"GPU {g}: {k}" for g, k in per.items())
                     + f"; up to {jobs_per_gpu} a card)")
        return text

    running: list[tuple[RunSpec, Any, int | None]] = []
    if type(ex).__name__ == "SlurmExecutor":
        jobs = ex.map_array(job, todo) if todo else []
        running = [(s, j, None) for s, j in zip(todo, jobs, strict=True)]
        queue: list[RunSpec] = []
    else:
        queue = list(todo)
    free = gpu_slots(gpus, jobs_per_gpu) if gpus else []
    slots = len(free) if gpus else parallel
    if gpus and queue:
        report(f"{min(len(queue), slots)} jobs at a time: {jobs_per_gpu} per GPU on GPU(s) {', '.join(map(str, gpus))}")
    last = ""
    while queue or running:
        while queue and len(running) < slots:
            spec = queue.pop(0)
            gpu = free.pop(0) if gpus else None
            running.append((spec, ex.submit(_job_on_gpu, spec, gpu), gpu))
        for item in list(running):
            spec, j, gpu = item
            if j.done():
                finished(spec, j)
                running.remove(item)
                if gpu is not None:
                    free.append(gpu)
        now = line()
        if now.split("]", 1)[1] != last:
            report(now)
            last = now.split("]", 1)[1]
        if running:
            time.sleep(poll_s)
    out.wall_s = time.time() - t0
    report(f"finished in {out.wall_s:.0f} s: {out.count('done')} made, {out.count('cached')} in the cache, "
           f"{out.count('skipped')} skipped (another process), {out.count('failed')} failed")
    return out


__all__ += ["executor", "run_grid", "GridReport", "gpu_slots", "jobs_per_gpu_by_memory"]
