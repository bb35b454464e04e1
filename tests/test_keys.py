"""Names spelled in the light key modules agree with the code that really writes them: TFX's
executors and the signatures trainer_module exports."""

from __future__ import annotations

from tfx.components.evaluator import constants as evaluator_constants
from tfx.components.infra_validator import executor as infra_validator_executor
from tfx.components.pusher import executor as pusher_executor

from components.atomic_pusher import keys as pusher_keys
from components.reporting_evaluator import keys as evaluator_keys
from components.serving_check import keys as check_keys
from serving import contract
from trainer_module import signatures


def test_tfx_names_on_the_blessings_and_the_pushed_model():
    assert evaluator_keys.BLESSED == evaluator_constants.ARTIFACT_PROPERTY_BLESSED_KEY
    assert evaluator_keys.BASELINE_MODEL_ID == evaluator_constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY
    assert check_keys.BLESSED == infra_validator_executor._BLESSED_KEY
    assert pusher_keys.PUSHED == pusher_executor._PUSHED_KEY
    assert pusher_keys.PUSHED_VERSION == pusher_executor._PUSHED_VERSION_KEY
    assert pusher_keys.PUSHED_DESTINATION == pusher_executor._PUSHED_DESTINATION_KEY


def test_the_serving_contract_names_what_trainer_module_exports():
    # trainer_module keeps its own spelling (its source is in the cache key): the two must agree.
    assert contract.SIGNATURES == (signatures.SERVING_DEFAULT, signatures.SERVING_RAW, signatures.TRANSFORM_FEATURES)
    assert contract.EXAMPLES_INPUT == signatures.EXAMPLES_INPUT
    assert (contract.OUTPUT_PROBABILITIES, contract.OUTPUT_CLASS_ID, contract.OUTPUT_LABEL,
            contract.OUTPUT_CLASSES) == (signatures.OUTPUT_PROBABILITIES, signatures.OUTPUT_CLASS_ID,
                                         signatures.OUTPUT_LABEL, signatures.OUTPUT_CLASSES)


def test_the_training_report_entry_of_the_class_names_is_the_one_recorded():
    from components.reporting_trainer import keys as trainer_keys
    from trainer_module import train

    assert train.CLASS_NAMES_ENTRY == trainer_keys.CLASS_NAMES_KEY


def test_latency_keys_name_each_percentile_and_batch_size():
    assert contract.LATENCY_KEYS == ("p50_ms_b1", "p99_ms_b1", "p50_ms_b64", "p99_ms_b64")


def test_property_prefixes_do_not_overlap():
    # The run summary and lineage read each family by its prefix: one must not swallow another.
    prefixes = [evaluator_keys.METRIC_PREFIX, evaluator_keys.DIFF_PREFIX]
    assert not [a for a in prefixes for b in prefixes if a != b and a.startswith(b)]
    for name in (evaluator_keys.SLICE_METRICS, evaluator_keys.UNDEFINED_METRICS, evaluator_keys.CONFUSION_MATRIX):
        assert not name.startswith(tuple(prefixes)), name


def test_regression_output_name_agrees():
    assert contract.OUTPUT_PREDICTION == signatures.OUTPUT_PREDICTION


def test_blessing_metric_names_are_the_ones_tfma_records():
    # TFMA computes a class of its own if it has one, else the Keras metric of that name;
    # either way the instance's name is what the evaluation records.
    import tensorflow_model_analysis as tfma
    import tf_keras

    for metric, class_name in evaluator_keys.METRIC_CLASS_NAMES.items():
        metric_class = getattr(tfma.metrics, class_name, None) or getattr(tf_keras.metrics, class_name)
        assert metric_class().name == evaluator_keys.METRIC_NAMES[metric], metric
