"""A single-node SLURM cluster on this machine, for the opt-in `make test-slurm` (never in `make test`).

Debian's packages: `apt-get install slurm-wlm munge` (SLURM 22.05 on Debian 12; the package installs
`/etc/munge/munge.key`). `local_slurm(folder)` writes a `slurm.conf` for this host into `folder` (one node with
this machine's cores, one partition `debug`, no accounting), starts munged if it is not running, then
slurmctld and slurmd on their own ports, waits for the node to be idle, and stops both on exit. The daemons
run as root (`SlurmdUser=root`): without root, or without the packages, `unavailable()` says why."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scancel")


def unavailable() -> str | None:
    """Why a local SLURM cannot be started here, or None."""
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        return f"SLURM is not installed (missing {', '.join(missing)}): apt-get install slurm-wlm munge"
    if os.geteuid() != 0:
        return "a local SLURM node needs root (slurmd runs jobs as their user)"
    if not Path("/etc/munge/munge.key").is_file():
        return "no /etc/munge/munge.key (the munge package makes it)"
    return None


def _exe(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        total_kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
    return max(1000, total_kb // 1024 - 2000)


def write_conf(folder: Path, port: int = 16817) -> Path:
    """`folder/slurm.conf`: this host as the controller and its one node."""
    host = socket.gethostname()
    for sub in ("state", "spool", "log", "run"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    conf = folder / "slurm.conf"
    conf.write_text(f"""ClusterName=tokuni
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/run/slurmctld.pid
SlurmdPidFile={folder}/run/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
SlurmctldPort={port}
SlurmdPort={port + 1}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName={host} CPUs={os.cpu_count()} RealMemory={_memory_mb()} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def _start_munge() -> None:
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    subprocess.run([_exe("munged"), "--force"], check=True, capture_output=True)


@contextlib.contextmanager
def local_slurm(folder: Path, timeout_s: float = 60.0) -> Iterator[dict[str, str]]:
    """Start the cluster; yields the environment (SLURM_CONF) its clients need; stops it on exit."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    conf = write_conf(Path(folder))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    before = set(_pids("slurmstepd"))
    _start_munge()
    subprocess.run([_exe("slurmctld"), "-f", str(conf)], check=True, env=env)
    subprocess.run([_exe("slurmd"), "-f", str(conf)], check=True, env=env)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if state.strip() == "idle":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local SLURM node is not idle after {timeout_s:.0f} s (sinfo: {state!r}); "
                                   f"logs in {folder}/log")
            time.sleep(1)
        yield {"SLURM_CONF": str(conf)}
    finally:
        subprocess.run(["scancel", "--user", str(os.geteuid())], env=env, capture_output=True)
        pids = []
        for pid_file in ("slurmd.pid", "slurmctld.pid"):
            with contextlib.suppress(FileNotFoundError, ValueError):
                pids.append(int((Path(folder) / "run" / pid_file).read_text().strip()))
        _stop(pids)
        _stop([p for p in _pids("slurmstepd") if p not in before], grace_s=2.0)   # job steps slurmd left behind


def _pids(name: str) -> list[int]:
    out = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _stop(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM the daemons, then SIGKILL whichever is still there after `grace_s` (slurmd can linger)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        time.sleep(0.5)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
