"""MultiWorkerMirroredStrategy with two worker processes on localhost (TF_CONFIG)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import portpicker
import pytest
import tensorflow as tf

from trainer_module import hardware

pytestmark = pytest.mark.e2e

WORKER_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    import tensorflow_transform as tft
    from pipeline import datasets
    from trainer_module import hardware, model, signatures, train
    PENGUINS = datasets.load("penguins").feature_spec()

    transform_graph, export_dir = sys.argv[1], sys.argv[2]
    strategy = hardware.build_strategy("multi_worker")
    rng = np.random.default_rng(0)
    x = {f"{k}_xf": rng.normal(size=512).astype("float32")
         for k in ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")}
    x.update({f"{k}_xf": rng.integers(0, 3, size=512) for k in ("island", "sex")})
    y = (x["bill_length_mm_xf"] > 0).astype("int64") + (x["flipper_length_mm_xf"] > 0).astype("int64")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32 * strategy.num_replicas_in_sync).repeat()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    args = (PENGUINS, {"island": 3, "sex": 3}, 3, (16,), 0.05)
    with strategy.scope():
        trained = model.build_model(*args)
    trained.fit(dataset.with_options(options), steps_per_epoch=20, epochs=2, verbose=0)
    chief = hardware.is_chief(os.environ["TF_CONFIG"])
    with train.worker_dir(export_dir, chief) as target:
        signatures.export(train.serving_copy(trained, args), tft.TFTransformOutput(transform_graph), PENGUINS, target)
        written = os.path.exists(os.path.join(target, "saved_model.pb"))
    print(json.dumps({"chief": chief, "replicas": strategy.num_replicas_in_sync, "dir": target,
                      "written": written, "dir_exists_after": os.path.exists(target)}))
    """
)


def test_two_workers_train_and_only_the_chief_exports(first_run, tmp_path):
    transform_graph = sorted((first_run.config.pipeline_root / "Transform" / "transform_graph").iterdir())[0]
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    export_dir = tmp_path / "serving_model"
    workers = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})}
        workers.append(subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, str(transform_graph), str(export_dir)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    results = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))

    chief, other = results
    assert chief["chief"] and not other["chief"]
    assert chief["replicas"] == other["replicas"] == 2
    assert chief["written"] and other["written"], "both workers take part in saving"
    assert chief["dir"] == str(export_dir) and chief["dir_exists_after"]
    assert other["dir"] != str(export_dir) and not other["dir_exists_after"], "non-chief export removed"

    loaded = tf.saved_model.load(str(export_dir))
    outputs = loaded.signatures["serving_raw"](
        island=tf.constant(["Dream", "Biscoe"]), sex=tf.constant(["male", ""]),
        bill_length_mm=tf.constant([39.0, 47.0]), bill_depth_mm=tf.constant([18.0, 15.0]),
        flipper_length_mm=tf.constant([190.0, 220.0]), body_mass_g=tf.constant([3700.0, 5000.0]),
    )
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert hardware.workers_in_tf_config(json.dumps({"cluster": cluster})) == 2
