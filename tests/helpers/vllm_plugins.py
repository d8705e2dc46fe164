"""vLLM plugins for end-to-end tests: a plugin module installed in a folder of its own, with an
entry point of the ``vllm.general_plugins`` group, which vLLM loads in each of its processes
(the engine core and its workers too) when that folder is on ``PYTHONPATH``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# A vLLM plugin (loaded in every vLLM process, from an entry point of the vllm.general_plugins
# group) that SIGKILLs the engine core process (the model runs in a worker process under it)
# at the AT-th call of Qwen2.5-VL's vision encoder in it, while other prompts are generating:
# mid-batch whatever the run's pace, up to TIMES deaths in all (one line each in FILE).
# KILL_ENGINE_CORE="AT,TIMES,FILE".
KILL_PLUGIN = """
import fcntl
import os
import signal

def engine_core():
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/comm") as comm:
            if "EngineCor" in comm.read():
                return pid
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no engine core process above this one")

def register():
    spec = os.environ.get("KILL_ENGINE_CORE")
    if not spec:
        return
    at, times, record = spec.split(",", 2)
    from vllm.model_executor.models import qwen2_5_vl

    model = qwen2_5_vl.Qwen2_5_VLForConditionalGeneration
    original = model._process_image_input
    calls = [0]

    def process(self, image_input):
        calls[0] += 1
        if calls[0] == int(at):
            with open(record, "a+") as deaths:
                fcntl.flock(deaths, fcntl.LOCK_EX)  # two replicas' engine cores: one count
                deaths.seek(0)
                if deaths.read().count("\\n") < int(times):
                    deaths.write(f"{os.getpid()}\\n")
                    deaths.flush()
                    os.fsync(deaths.fileno())
                    os.kill(engine_core(), signal.SIGKILL)
        return original(self, image_input)

    model._process_image_input = process
"""


def with_plugin(
    env: Mapping[str, str], folder: Path, name: str, source: str, **variables: str
) -> dict[str, str]:
    """``env`` with the vLLM plugin ``source`` installed (as module ``name``) in ``folder``,
    and ``variables`` for it."""
    folder.mkdir()
    (folder / f"{name}.py").write_text(source)
    info = folder / f"{name}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[vllm.general_plugins]\n{name} = {name}:register\n")
    path = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": path, **variables}


def kill_engine_core(
    env: Mapping[str, str], folder: Path, at: int, times: int
) -> tuple[dict[str, str], Path]:
    """``env`` for a run whose engine core is killed from inside (KILL_PLUGIN) at the ``at``-th
    encoder call of each engine core, ``times`` times in all; and the file that records each
    death (a line each)."""
    record = folder / "deaths"
    return with_plugin(
        env, folder, "kill_plugin", KILL_PLUGIN, KILL_ENGINE_CORE=f"{at},{times},{record}"
    ), record
