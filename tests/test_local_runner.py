from pipeline.config import MULTI_PROCESS_THRESHOLD_BYTES, PipelineConfig
from pipeline.runners import local


def test_small_data_runs_in_memory_without_beam_args(tmp_path):
    (tmp_path / "a.csv").write_text("species\nAdelie\n")
    mode = local.beam_mode(PipelineConfig(), tmp_path)
    assert mode == "in_memory"
    assert local.beam_pipeline_args(mode) == []  # the DirectRunner's default


def test_a_beam_component_of_a_local_run_builds_no_sdist_of_tfx(monkeypatch):
    from tfx.components.statistics_gen.executor import Executor as StatisticsGen
    from tfx.utils import dependency_utils

    args = local.prepare_direct_runner("multi_process")
    assert StatisticsGen(StatisticsGen.Context(beam_pipeline_args=args))._beam_pipeline_args == args
    # What TFX does without the setting: builds its sdist and adds it to the args.
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", lambda: "/built/tfx_ephemeral.tar.gz")
    assert dependency_utils.make_beam_dependency_flags.tfx_own(args) == [
        *args, "--extra_package=/built/tfx_ephemeral.tar.gz"]


def test_large_data_runs_multi_process(tmp_path):
    with open(tmp_path / "big.csv", "wb") as handle:  # sparse: no disk used
        handle.truncate(MULTI_PROCESS_THRESHOLD_BYTES + 1)
    mode = local.beam_mode(PipelineConfig(), tmp_path)
    assert mode == "multi_process"
    assert "--direct_running_mode=multi_processing" in local.beam_pipeline_args(mode)


def test_explicit_mode_overrides_the_size_rule(tmp_path):
    (tmp_path / "a.csv").write_text("species\nAdelie\n")
    assert local.beam_mode(PipelineConfig(beam_mode="multi_process"), tmp_path) == "multi_process"


def test_the_threshold_lies_between_the_measured_sizes(tmp_path):
    # benchmarks/scale_bench.py: the synthetic data at 100k rows (8.5 MB) ran faster in
    # memory, at 1M rows (85 MB) faster in worker processes.
    for size, mode in ((8_500_000, "in_memory"), (85_000_000, "multi_process")):
        (tmp_path / str(size)).mkdir()
        with open(tmp_path / str(size) / "data.csv", "wb") as handle:  # sparse: no disk used
            handle.truncate(size)
        assert local.beam_mode(PipelineConfig(), tmp_path / str(size)) == mode
