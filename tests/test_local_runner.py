from pipeline.config import MULTI_PROCESS_THRESHOLD_BYTES, PipelineConfig
from pipeline.runners import local


def test_small_data_runs_in_memory_without_beam_args(tmp_path):
    (tmp_path / "a.csv").write_text("species\nAdelie\n")
    mode = local.beam_mode(PipelineConfig(), tmp_path)
    assert mode == "in_memory"
    # No args at all: any Beam arg makes TFX build an sdist of itself per component.
    assert local.beam_pipeline_args(mode) == []


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
