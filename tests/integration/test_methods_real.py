"""The methods users come for, tuned end to end on the REAL vLLM server (CPU build) with the
drafters `make models` trains: EAGLE-3 and DFlash beside ngram and draft_model (the session's
reference study, tests/reference_study.py), DSpark's start-up failure on this build, and MTP on a
target carrying an MTP layer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reference_study import ENV, ReferenceStudy, SERVER_ARGS, short_code_workload
from tuner.store import ResultStore, open_database

pytestmark = pytest.mark.integration


def test_optimize_over_every_method_names_a_winner(reference_study: ReferenceStudy):
    drafts = reference_study.drafts
    rows = ResultStore(open_database(reference_study.db_url)).trials()
    by_draft = {(r.config or {}).get("model", (r.config or {}).get("method", "baseline")): r for r in rows}
    assert set(by_draft) == {"baseline", "ngram", *drafts.values()}
    statuses = {name: by_draft[folder].status for name, folder in drafts.items()}
    assert statuses == {"draft": "complete", "broken": "failed", "eagle3": "complete",
                        "dflash": "complete", "dspark": "failed"}, [r.failure_cause for r in rows]
    assert by_draft["ngram"].status == by_draft["baseline"].status == "complete"

    # Each --draft PATH given alone got its method from its checkpoint.
    assert {name: by_draft[folder].config["method"] for name, folder in drafts.items()} == {
        "draft": "draft_model", "broken": "draft_model", "eagle3": "eagle3", "dflash": "dflash",
        "dspark": "dspark"}
    eagle3 = by_draft[drafts["eagle3"]]
    assert eagle3.config == {"method": "eagle3", "model": drafts["eagle3"], "num_speculative_tokens": 3}
    # The head was trained on the target's own hidden states: it drafts what the target says.
    assert eagle3.mean_acceptance_length >= 1.5, eagle3.per_position
    assert len(eagle3.per_position) == 3

    # A block drafter runs at the k its checkpoint was trained for (block of 5: anchor + 4), not --k.
    dflash = by_draft[drafts["dflash"]]
    assert dflash.config["num_speculative_tokens"] == 4 and len(dflash.per_position) == 4
    assert dflash.acceptance_rate > 0

    # vLLM 0.32's CPU build has DSpark only in its V2 model runner, which needs Triton: the trial
    # is stored as failed with vLLM's own one-line cause, known from the installed vLLM's rules
    # before a start (no server, no log), and the study goes on.
    dspark = by_draft[drafts["dspark"]]
    assert "Model Runner V1 does not support: dspark speculative decoding" in dspark.failure_cause
    assert dspark.failure_cause.startswith("not started:") and dspark.server_log_path is None

    answer = reference_study.answer
    assert answer["winner"]["config"] in [r.config for r in rows]  # a measured config, or none
    assert answer["baseline"]["tokens_per_s"] == pytest.approx(by_draft["baseline"].tokens_per_s)


def test_mtp_drafts_with_the_target_s_own_mtp_layer(tmp_path, tiny_models):
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "measure", "--workload", str(short_code_workload(tmp_path)),
         "--model", str(tiny_models / "mtp-target"), "--method", "mtp", "--k", "1",
         "--concurrency", "2", "--log-dir", str(tmp_path / "logs"), "--json", *SERVER_ARGS],
        capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_,) = json.loads(result.stdout)["runs"]
    # The MiMo-style target's MTP layer was distilled to propose the token after next.
    assert run_["acceptance"]["mean_acceptance_length"] > 1.3, run_["acceptance"]
