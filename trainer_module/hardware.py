"""Strategy, precision and XLA selection from the devices this process sees.

Each choice is `auto` by default and overridable (pipeline config, CLI). The auto rules:
- strategy: TPUStrategy when a TPU resolves, MultiWorkerMirroredStrategy when TF_CONFIG
  lists more than one worker, MirroredStrategy with more than one GPU, else the default;
- precision: mixed_float16 on GPUs of compute capability 7.0+, mixed_bfloat16 on TPU and
  on CPUs with native bfloat16 arithmetic (AVX512_BF16 or AMX), float32 elsewhere
  (without those instructions bfloat16 is emulated and slower than float32);
- XLA (training only; serving graphs are never XLA-compiled): on for GPU and TPU, except
  with a sparse-aware optimizer off TPU: its touched-row count changes every step, so XLA
  would recompile, and on CPU it measured slower (benchmarks/trainer_bench.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import tensorflow as tf

# TensorFlow is imported inside the functions that need it, so the pipeline's config and
# CLI can validate these names without paying for a TF import.
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
XLA_MODES = ("auto", "on", "off")
# Tensor cores, which make float16 math fast, arrived with compute capability 7.0 (Volta).
MIN_FLOAT16_COMPUTE_CAPABILITY = (7, 0)
# /proc/cpuinfo flags of x86 CPUs that compute in bfloat16 natively.
CPU_BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@dataclasses.dataclass(frozen=True)
class Devices:
    """What the process can train on; detect() fills it, tests build it by hand."""

    gpu_compute_capabilities: tuple[tuple[int, int], ...] = ()
    has_tpu: bool = False
    num_workers: int = 1
    cpu_bfloat16: bool = False  # the CPU has bfloat16 instructions

    @property
    def num_gpus(self) -> int:
        return len(self.gpu_compute_capabilities)


@dataclasses.dataclass(frozen=True)
class HardwareChoice:
    strategy: str
    precision: str
    xla: bool


def detect(tpu_address: str | None = None) -> Devices:
    import tensorflow as tf

    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        capabilities.append(tuple(details.get("compute_capability", (0, 0))))
    return Devices(
        gpu_compute_capabilities=tuple(capabilities),
        has_tpu=_tpu_resolves(tpu_address),
        num_workers=workers_in_tf_config(os.environ.get("TF_CONFIG")),
        cpu_bfloat16=cpu_has_bfloat16(),
    )


def cpu_has_bfloat16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU flags include native bfloat16 arithmetic (False where unknown)."""
    try:
        with open(cpuinfo) as handle:
            for line in handle:
                if line.startswith("flags"):
                    return bool(CPU_BFLOAT16_FLAGS & set(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return False


def workers_in_tf_config(tf_config: str | None) -> int:
    """Chief plus workers listed in a TF_CONFIG cluster spec (1 when absent)."""
    if not tf_config:
        return 1
    cluster = json.loads(tf_config).get("cluster", {})
    return max(1, len(cluster.get("chief", [])) + len(cluster.get("worker", [])))


def is_chief(tf_config: str | None) -> bool:
    """Whether this process exports and reports: the chief, else worker 0, else a lone process."""
    if not tf_config:
        return True
    spec = json.loads(tf_config)
    task = spec.get("task", {})
    task_type, index = task.get("type"), int(task.get("index", 0))
    if task_type is None or task_type == "chief":
        return True
    return task_type == "worker" and index == 0 and "chief" not in spec.get("cluster", {})


def _tpu_resolves(tpu_address: str | None) -> bool:
    if not (tpu_address or os.environ.get("TPU_NAME")):
        return False
    import tensorflow as tf

    try:
        tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address)
        return True
    except (ValueError, tf.errors.NotFoundError):
        return False


def choose(devices: Devices, strategy: str = "auto", precision: str = "auto", xla: str = "auto",
           sparse_updates: bool = False) -> HardwareChoice:
    """Resolves each `auto` against the devices; explicit values are kept as given.

    sparse_updates: the optimizer updates embedding rows sparsely (optimizer_choice.SPARSE_OPTIMIZERS).
    """
    _check_choice("strategy", strategy, STRATEGIES)
    _check_choice("precision", precision, PRECISIONS)
    _check_choice("xla", xla, XLA_MODES)
    if strategy == "auto":
        if devices.has_tpu:
            strategy = "tpu"
        elif devices.num_workers > 1:
            strategy = "multi_worker"
        elif devices.num_gpus > 1:
            strategy = "mirrored"
        else:
            strategy = "default"
    if precision == "auto":
        if devices.has_tpu:
            precision = "mixed_bfloat16"
        elif devices.num_gpus and all(
            cc >= MIN_FLOAT16_COMPUTE_CAPABILITY for cc in devices.gpu_compute_capabilities
        ):
            precision = "mixed_float16"
        elif not devices.num_gpus and devices.cpu_bfloat16:
            precision = "mixed_bfloat16"
        else:
            precision = "float32"
    if xla == "auto":
        use_xla = devices.has_tpu or (devices.num_gpus > 0 and not sparse_updates)
    else:
        use_xla = xla == "on"
    return HardwareChoice(strategy=strategy, precision=precision, xla=use_xla)


def build_strategy(name: str, devices: Sequence[str] | None = None) -> tf.distribute.Strategy:
    """The tf.distribute strategy for a resolved (non-auto) name."""
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0] if devices else _first_device())
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=list(devices) if devices else None)
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES[1:])}")


def _first_device() -> str:
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return gpus[0].name if gpus else "/cpu:0"


def _check_choice(field: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {field} {value!r}; choose one of: {', '.join(allowed)}")
