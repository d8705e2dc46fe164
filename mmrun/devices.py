"""The devices of a run: which GPUs (or CPU cores) each engine of a parallel run gets."""

from __future__ import annotations

import os
from dataclasses import dataclass

from mmrun.errors import UsageError


@dataclass(frozen=True)
class Replica:
    """One engine of a parallel run: its index and its devices."""

    index: int
    gpus: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()

    def apply(self) -> None:
        """Confine this process (and the engine processes it starts) to the replica's devices:
        its GPUs by CUDA_VISIBLE_DEVICES, its cores by CPU affinity (vLLM's CPU backend binds
        its threads to the cores it is allowed)."""
        if self.gpus:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)

    def as_json(self) -> dict[str, object]:
        return {"replica": self.index, "gpus": list(self.gpus), "cpus": list(self.cpus)}

    def describe(self) -> str:
        if self.gpus:
            return f"GPU {','.join(self.gpus)}"
        if self.cpus:
            return f"CPU {','.join(str(c) for c in self.cpus)}"
        return "shared"


def layout(replicas: int, per_replica: int, device: str | None, gpus: list[str]) -> list[Replica]:
    """Which devices each replica gets; raises UsageError where they do not fit."""
    if device == "gpu":
        needed = replicas * per_replica
        if needed > len(gpus):
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            where = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
            raise UsageError(
                f"-dp {replicas} with {per_replica} GPU(s) each needs {needed} GPUs; "
                f"{len(gpus)} are visible{where}",
                hint="lower -dp or -tp, or make more GPUs visible",
            )
        return [
            Replica(i, gpus=tuple(gpus[i * per_replica : (i + 1) * per_replica]))
            for i in range(replicas)
        ]
    cores = sorted(os.sched_getaffinity(0))
    if replicas > len(cores):  # more engines than cores: they share them all
        return [Replica(i) for i in range(replicas)]
    size = len(cores) // replicas
    return [Replica(i, cpus=tuple(cores[i * size : (i + 1) * size])) for i in range(replicas)]


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES if set, else what nvidia-smi lists."""
    import subprocess

    chosen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if chosen is not None:
        return [d.strip() for d in chosen.split(",") if d.strip() and d.strip() != "-1"]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if listing.returncode != 0:
        return []
    return [str(i) for i, line in enumerate(listing.stdout.splitlines()) if line.startswith("GPU ")]
