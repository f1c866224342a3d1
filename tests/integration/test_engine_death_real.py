"""A config whose engine dies at its first request, on the REAL vLLM server (CPU build): the trial
fails with vLLM's own reason, read from the server log as at a failed start, and the log's path;
not with what the client saw of the broken streams ("the stream ended without a usage report").

The case is real: vLLM's CPU build starts with the synthetic rejection sampler and its engine dies
at the first verification ("AssertionError: Synthetic acceptance not supported with CPU
sampling"). `tuner` refuses --synthetic-acceptance on this build before any start, so the trial
function is called here directly, as a study's trial calls it.
"""

from __future__ import annotations

import pytest

from reference_study import short_code_workload
from tuner.engine import ServerOptions, SpecConfig
from tuner.errors import ServerDiedError
from tuner.measure.trial import MeasureSettings, measure_config
from tuner.workload.loader import load_workload

pytestmark = pytest.mark.integration

REASON = "AssertionError: Synthetic acceptance not supported with CPU sampling"


@pytest.mark.parametrize(("warmup", "during"), [(2, "warm-up"), (0, "the replay")])
def test_an_engine_that_dies_at_the_first_request_fails_the_trial_with_vllms_reason(
        tmp_path, tiny_models, warmup, during):
    workload = load_workload(short_code_workload(tmp_path, requests=4))
    server = ServerOptions(server_args=["--enforce-eager", "--max-model-len=1024"], log_dir=tmp_path / "logs",
                           synthetic_acceptance=(0.9, 0.8))
    settings = MeasureSettings(warmup=warmup, retries=0, server=server)
    with pytest.raises(ServerDiedError) as caught:
        measure_config(str(tiny_models / "target"), SpecConfig("ngram", 2), workload, settings)
    message = str(caught.value)
    assert REASON in message and f"during {during}" in message, message
    (log,) = (tmp_path / "logs").iterdir()
    assert caught.value.log_path == log and f"Full log: {log}" in message
    assert REASON in log.read_text()  # vLLM's own line, not one the tuner made up
    assert "usage report" not in message and "failed" not in message
