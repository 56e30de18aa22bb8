"""SlurmClusterResolver: the cluster of a Slurm job step, from Slurm's environment.

Slurm starts one process per task and tells each, in environment variables, its rank
(SLURM_PROCID), the number of tasks (SLURM_STEP_NUM_TASKS), the nodes
(SLURM_STEP_NODELIST, a compressed host list such as "n[1-3],m5") and how many tasks
run on each (SLURM_STEP_TASKS_PER_NODE, e.g. "2(x3),1").  Tasks are laid out node by
node (nodes sorted by name), each node's tasks on consecutive ports from `port_base`,
and the jobs (sorted by name) take consecutive ranks; each task gets its own GPUs, which
`cluster_spec()` makes visible by setting CUDA_VISIBLE_DEVICES (unless auto_set_gpu is
off).
"""

from __future__ import annotations

import os
import re
import subprocess

from asyncflow.distribute.cluster_resolver.base import ClusterResolver, format_master_url
from asyncflow.distributed.cluster import ClusterSpec

__all__ = ["SlurmClusterResolver", "expand_hostlist", "expand_tasks_per_node"]


def _split_hostlist(hostlist: str) -> list[str]:
    """'n[1-2],m5' -> ['n[1-2]', 'm5']: commas inside brackets do not split."""
    parts, current, depth = [], "", 0
    for c in hostlist:
        if c == "[":
            if depth:
                raise ValueError()  # (TF's failed assertion: no reason given)
            depth = 1
        elif c == "]":
            depth = 0
        elif c == "," and not depth:
            if not current:
                raise ValueError()
            parts.append(current)
            current = ""
            continue
        current += c
    if current:
        parts.append(current)
    return parts


def _expand_range(ranges: str) -> list[str]:
    """'3-5,7' -> ['3', '4', '5', '7'], keeping the zero padding of each range's start."""
    out = []
    for part in ranges.split(","):
        bounds = part.split("-")
        if len(bounds) > 2:
            raise ValueError()
        first, last = bounds[0], bounds[-1]
        out.extend(str(i).zfill(len(first)) for i in range(int(first), int(last) + 1))
    return out


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list as host names, in order: 'n[1-2],m5' -> n1, n2, m5.

    Raises:
      ValueError: a host list Slurm would not write.
    """
    hosts = []
    try:
        for part in _split_hostlist(hostlist):
            match = re.match(r"([^,[\]]*)(\[([^\]]+)\])?$", part)
            if match is None:
                raise ValueError(f"Invalid part: {part}")
            prefix = match.group(1) or ""
            if match.group(3) is None:
                hosts.append(prefix)
            else:
                hosts.extend(prefix + i for i in _expand_range(match.group(3)))
    except Exception as e:
        raise ValueError(f'Invalid hostlist format "{hostlist}": {e}') from None
    return hosts


def expand_tasks_per_node(tasks_per_node: str) -> list[int]:
    """Slurm's tasks-per-node list, one entry per node: '3(x2),1' -> [3, 3, 1].

    Raises:
      ValueError: a list Slurm would not write (TF's message, with an empty reason).
    """
    out = []
    for part in tasks_per_node.split(","):
        match = re.match(r"(\d+)(\(x(\d+)\))?$", part)
        if match is None:
            raise ValueError(f'Invalid tasks-per-node list format "{tasks_per_node}": ')
        out.extend([int(match.group(1))] * int(match.group(3) or 1))
    return out


def _slurm_var(name: str) -> str:
    """SLURM_<name> from the environment.

    Raises:
      RuntimeError: it is not set (not inside a Slurm step).
    """
    key = "SLURM_" + name
    try:
        return os.environ[key]
    except KeyError:
        raise RuntimeError(
            f"{key} not found in environment. Not running inside a SLURM step?"
        ) from None


def _num_gpus() -> int:
    """GPUs on this node: CUDA_VISIBLE_DEVICES's entries, else nvidia-smi's list.

    Raises:
      RuntimeError: nvidia-smi failed.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len(visible.split(","))
    try:
        output = subprocess.check_output(["nvidia-smi", "--list-gpus"], encoding="utf-8")
    except subprocess.CalledProcessError as e:
        raise RuntimeError(
            "Could not get number of GPUs from nvidia-smi. Maybe it is missing?\n"
            f"Output: {e.output}"
        ) from None
    return sum(line.startswith("GPU ") for line in output.strip().split("\n"))


class SlurmClusterResolver(ClusterResolver):
    """The cluster of the Slurm job step this process runs in.

    `jobs` maps job names to task counts (default: every task a "worker");
    `tasks_per_node` is a count for every node or a {host: count} dict (default: from
    Slurm); GPUs per node come from CUDA_VISIBLE_DEVICES or nvidia-smi, and are shared
    evenly among a node's tasks unless `gpus_per_task` is given.

    Raises:
      RuntimeError: a Slurm variable is missing, more GPUs are asked for per node than
        it has, or `jobs` asks for a number of tasks other than Slurm started.
      ValueError: Slurm's host or tasks-per-node list cannot be read.
    """

    def __init__(
        self,
        jobs=None,
        port_base=8888,
        gpus_per_node=None,
        gpus_per_task=None,
        tasks_per_node=None,
        auto_set_gpu=True,
        rpc_layer="grpc",
    ):
        self._rank = int(_slurm_var("PROCID"))
        if jobs is None:
            jobs = {"worker": int(_slurm_var("STEP_NUM_TASKS"))}
        self._jobs = jobs
        self._port_base = port_base
        if tasks_per_node is None:
            hosts = expand_hostlist(_slurm_var("STEP_NODELIST"))
            counts = expand_tasks_per_node(_slurm_var("STEP_TASKS_PER_NODE"))
            self._task_configuration = dict(zip(hosts, counts, strict=False))
        elif isinstance(tasks_per_node, dict):
            self._task_configuration = tasks_per_node
        else:
            hosts = expand_hostlist(_slurm_var("STEP_NODELIST"))
            self._task_configuration = {host: int(tasks_per_node) for host in hosts}
        most_per_node = max(self._task_configuration.values())
        num_tasks = sum(self._task_configuration.values())
        if gpus_per_node is None:
            gpus_per_node = _num_gpus()
        if gpus_per_task is None:
            gpus_per_task = gpus_per_node // most_per_node
        self._gpus_per_node = gpus_per_node
        self._gpus_per_task = gpus_per_task
        self._auto_set_gpu = auto_set_gpu
        self.task_type = None
        self.task_id = None
        self.rpc_layer = rpc_layer
        self._gpu_allocation: list[str] = []
        self._cluster_allocation: dict = {}
        if most_per_node * gpus_per_task > gpus_per_node:
            raise RuntimeError("Requested more GPUs per node than available.")
        if sum(jobs.values()) != num_tasks:
            raise RuntimeError(
                f"Requested {sum(jobs.values())} tasks but only {num_tasks} were assigned."
            )

    def cluster_spec(self) -> ClusterSpec:
        """The cluster; also sets this task's type and id (and CUDA_VISIBLE_DEVICES to
        its GPUs when auto_set_gpu)."""
        addresses = []
        self._gpu_allocation = []
        for host, count in sorted(self._task_configuration.items()):
            # A node gives out at most as many tasks as it has GPU groups (TF's zip).
            gpu_starts = range(0, self._gpus_per_node, self._gpus_per_task)
            for offset, first_gpu in zip(range(count), gpu_starts, strict=False):
                addresses.append(f"{host}:{self._port_base + offset}")
                gpus = range(first_gpu, first_gpu + self._gpus_per_task)
                self._gpu_allocation.append(",".join(str(g) for g in gpus))
        self._cluster_allocation = {}
        start = 0
        for task_type, count in sorted(self._jobs.items()):
            self._cluster_allocation[task_type] = addresses[start : start + count]
            if start <= self._rank < start + count:
                self.task_type = task_type
                self.task_id = self._rank - start
            start += count
        if self._auto_set_gpu:
            os.environ["CUDA_VISIBLE_DEVICES"] = self._gpu_allocation[self._rank]
        return ClusterSpec(self._cluster_allocation)

    def get_task_info(self) -> tuple:
        """(task type, task id), known once `cluster_spec()` has run (else Nones)."""
        return self.task_type, self.task_id

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The given task's address (this one's by default), '' when neither is known."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        address = self.cluster_spec().task_address(task_type, task_id)
        return format_master_url(address, rpc_layer or self.rpc_layer)

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        return {"GPU": self._gpus_per_task}
