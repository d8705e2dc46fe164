"""The engine: the vLLM handle (handle.py, the only module that imports vLLM), what mmrun
reads from vLLM beyond its public API (vllm_internals.py), what its processes inherit
(environment.py), where their output and log go (output.py, log_stream.py), this process and
the engine's (processes.py), what a failure means (failures.py), the GPU defaults (gpu.py)
and the CPU build's KV cache (cpu.py). Callers use the names below."""

from mmrun.engine.environment import RPC_DIR_ENV, configure_environment, remove_temporary_files
from mmrun.engine.gpu import FRONTEND_THREADS_MAX, frontend_threads, use_frontend_threads
from mmrun.engine.handle import (
    Engine,
    Finished,
    RequestRejected,
    StartAborted,
    chat_input,
    device_name,
    generate_input,
    import_vllm,
    lora_request,
    sampling_params,
    shutdown,
    start,
    vllm_module,
)
from mmrun.engine.processes import descendants, interruptible, kill_engine_processes

__all__ = [
    "FRONTEND_THREADS_MAX",
    "RPC_DIR_ENV",
    "Engine",
    "Finished",
    "RequestRejected",
    "StartAborted",
    "chat_input",
    "configure_environment",
    "descendants",
    "device_name",
    "frontend_threads",
    "generate_input",
    "import_vllm",
    "interruptible",
    "kill_engine_processes",
    "lora_request",
    "remove_temporary_files",
    "sampling_params",
    "shutdown",
    "start",
    "use_frontend_threads",
    "vllm_module",
]
