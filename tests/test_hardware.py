"""Strategy / precision / XLA selection, and training under a real MirroredStrategy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests import REPO
from trainer_module import hardware
from trainer_module.hardware import Devices

V100, T4, K80 = (7, 0), (7, 5), (3, 7)


@pytest.mark.parametrize(
    "devices, expected",
    [
        (Devices(), hardware.HardwareChoice("default", "float32", False)),
        (Devices(gpu_compute_capabilities=(T4,)), hardware.HardwareChoice("default", "mixed_float16", True)),
        (Devices(gpu_compute_capabilities=(V100, V100)), hardware.HardwareChoice("mirrored", "mixed_float16", True)),
        (Devices(gpu_compute_capabilities=(K80, K80)), hardware.HardwareChoice("mirrored", "float32", True)),
        (Devices(num_workers=2), hardware.HardwareChoice("multi_worker", "float32", False)),
        (Devices(has_tpu=True), hardware.HardwareChoice("tpu", "mixed_bfloat16", True)),
        (Devices(cpu_bfloat16=True), hardware.HardwareChoice("default", "mixed_bfloat16", False)),
        (Devices(gpu_compute_capabilities=(K80,), cpu_bfloat16=True),
         hardware.HardwareChoice("default", "float32", True)),
    ],
)
def test_auto_choices_follow_the_devices(devices, expected):
    assert hardware.choose(devices) == expected


@pytest.mark.parametrize(
    "flags, expected",
    [("fpu sse avx2 avx512f avx512_bf16", True), ("fpu amx_bf16 amx_tile", True), ("fpu sse avx avx2", False)],
)
def test_cpu_bfloat16_from_the_cpu_flags(tmp_path, flags, expected):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n")
    assert hardware.cpu_has_bfloat16(str(cpuinfo)) is expected
    assert hardware.cpu_has_bfloat16(str(tmp_path / "absent")) is False


def test_explicit_choices_win_over_auto():
    choice = hardware.choose(Devices(gpu_compute_capabilities=(V100, V100)), "one_device", "float32", "off")
    assert choice == hardware.HardwareChoice("one_device", "float32", False)


@pytest.mark.parametrize("field, value", [("strategy", "magic"), ("precision", "float8"), ("xla", "maybe")])
def test_unknown_choice_names_the_options(field, value):
    with pytest.raises(ValueError, match=f"unknown {field} '{value}'; choose one of"):
        hardware.choose(Devices(), **{field: value})


@pytest.mark.parametrize(
    "tf_config, workers",
    [
        (None, 1),
        ('{"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}', 2),
        ('{"cluster": {"chief": ["localhost:1"], "worker": ["localhost:2"]}}', 2),
    ],
)
def test_workers_in_tf_config(tf_config, workers):
    assert hardware.workers_in_tf_config(tf_config) == workers


MIRRORED_BFLOAT16_SCRIPT = textwrap.dedent(
    """
    import json, os
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    import tf_keras as keras
    from pipeline import datasets
    from trainer_module import hardware, model, train

    strategy = hardware.build_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    rng = np.random.default_rng(0)
    x = {f"{k}_xf": rng.normal(size=256).astype("float32")
         for k in ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")}
    x.update({f"{k}_xf": rng.integers(0, 2, size=256) for k in ("island", "sex")})
    y = (x["bill_length_mm_xf"] > 0).astype("int64")
    args = (datasets.load("penguins").feature_spec(), {"island": 2, "sex": 2}, 2, (16,), 0.05)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    with strategy.scope():
        trained = model.build_model(*args)
    trained.fit(x, y, batch_size=32 * strategy.num_replicas_in_sync, epochs=3, verbose=0)
    keras.mixed_precision.set_global_policy("float32")
    serving = train.serving_copy(trained, args)
    p_trained, p_serving = trained.predict(x, verbose=0), serving.predict(x, verbose=0)
    print(json.dumps({
        "replicas": strategy.num_replicas_in_sync,
        "trained_dtype": trained.layers[-2].compute_dtype,
        "serving_dtypes": sorted({l.compute_dtype for l in serving.layers if "float" in str(l.compute_dtype)}),
        "serving_output": str(p_serving.dtype),
        "max_abs_diff": float(np.abs(p_trained - p_serving).max()),
        "accuracy": float(((p_serving[:, 1] > 0.5) == y).mean()),
    }))
    """
)


def test_mirrored_over_two_cpus_in_bfloat16_exports_a_float32_model(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-c", MIRRORED_BFLOAT16_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["trained_dtype"] == "bfloat16"
    assert result["serving_dtypes"] == ["float32"]
    assert result["serving_output"] == "float32"
    # Same weights; only bfloat16 vs float32 arithmetic differs.
    assert result["max_abs_diff"] < 0.05
    assert result["accuracy"] > 0.8


@pytest.mark.parametrize(
    "tf_config, chief",
    [
        (None, True),
        ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}', True),
        ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}', False),
        ('{"cluster": {"chief": ["c:0"], "worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}', False),
        ('{"cluster": {"chief": ["c:0"], "worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', True),
    ],
)
def test_only_one_process_is_the_chief(tf_config, chief):
    assert hardware.is_chief(tf_config) is chief


def test_linear_learning_rate_scaling_is_opt_in():
    from trainer_module import train
    from trainer_module.config import TrainingConfig

    plain = TrainingConfig.from_config({"learning_rate": 0.01})
    assert train.effective_learning_rate(plain, replicas=4) == 0.01
    scaled = TrainingConfig.from_config({"learning_rate": 0.01, "scale_learning_rate": True})
    assert train.effective_learning_rate(scaled, replicas=4) == pytest.approx(0.04)


# The Trainer's own path to its model: setup() from the Trainer's FnArgs, then Setup.build,
# under `mirrored` over two logical CPUs. A numeric-only regression spec: setup() reads no
# vocabulary, so the Transform output it is handed can be an empty directory.
SCALED_OPTIMIZER_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, tempfile
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    from tfx.components.trainer.fn_args_utils import FnArgs
    from trainer_module import config, features, model, train
    from trainer_module.config import TrainingConfig

    spec = features.FeatureSpec(dataset="penguins", task=features.REGRESSION, label_key="body_mass_g",
                                numeric_keys=("bill_length_mm", "flipper_length_mm"), categoricals=())
    found = {}
    for scaled in (False, True):
        knobs = TrainingConfig(learning_rate=float(sys.argv[1]), strategy="mirrored", precision="float32",
                               xla="off", optimizer="adam", scale_learning_rate=scaled).to_config()
        fn_args = FnArgs(custom_config={features.CONFIG_KEY: spec.to_config(), **knobs},
                         transform_output=tempfile.mkdtemp())
        built = train.setup(fn_args, config.training_of(fn_args)).build(model.PLAIN, {})
        found[str(scaled).lower()] = {"replicas": built.distribute_strategy.num_replicas_in_sync,
                                      "learning_rate": float(built.optimizer.learning_rate.numpy())}
    print(json.dumps(found))
    """
)


def test_the_optimizer_the_trainer_builds_trains_at_the_scaled_rate():
    """Catches a model built with the unscaled learning rate while the report shows the scaled one."""
    base = 0.02
    completed = subprocess.run([sys.executable, "-c", SCALED_OPTIMIZER_SCRIPT, str(base)],
                               capture_output=True, text=True, timeout=300, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    # README: `--scale-learning-rate` (linear scaling: learning rate × replicas); off, the rate as set.
    assert found["true"] == {"replicas": 2, "learning_rate": pytest.approx(base * 2, rel=1e-6)}
    assert found["false"] == {"replicas": 2, "learning_rate": pytest.approx(base, rel=1e-6)}
