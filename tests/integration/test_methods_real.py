"""The methods users come for, tuned end to end on the REAL vLLM server (CPU build) with the
drafters `make models` trains: EAGLE-3 and DFlash beside ngram and draft_model, DSpark's start-up
failure on this build, and MTP on a target carrying an MTP layer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .test_optimize_real import ENV, ROOT, SERVER_ARGS, optimize_cmd, run, trials

pytestmark = pytest.mark.integration


def test_optimize_over_every_method_names_a_winner(tmp_path, tiny_models):
    # ngram, draft_model and eagle3 are named; the DFlash and DSpark drafters are passed as
    # --draft PATH alone, and their method is read from their checkpoints.
    drafts = {m: str(tiny_models / m) for m in ("draft", "eagle3", "dflash", "dspark")}
    answer = json.loads(run(optimize_cmd(
        tmp_path, tiny_models, "--method", "ngram", "--method", "draft_model", "--method", "eagle3",
        *(a for d in drafts.values() for a in ("--draft", d)), "--k", "3", "--strategy", "grid",
        "--json")).stdout)
    rows = trials(tmp_path)
    by_method = {(r.config or {}).get("method", "baseline"): r for r in rows}
    assert list(by_method) == ["baseline", "ngram", "draft_model", "eagle3", "dflash", "dspark"]
    assert [r.status for r in rows] == ["complete"] * 5 + ["failed"], [r.failure_cause for r in rows]

    eagle3 = by_method["eagle3"]
    assert eagle3.config == {"method": "eagle3", "model": drafts["eagle3"], "num_speculative_tokens": 3}
    # The head was trained on the target's own hidden states: it drafts what the target says.
    assert eagle3.mean_acceptance_length >= 1.5, eagle3.per_position
    assert len(eagle3.per_position) == 3

    # A block drafter runs at the k its checkpoint was trained for (block of 5: anchor + 4), not --k.
    dflash = by_method["dflash"]
    assert dflash.config["num_speculative_tokens"] == 4 and len(dflash.per_position) == 4
    assert dflash.acceptance_rate > 0

    # vLLM 0.32's CPU build has DSpark only in its V2 model runner, which needs Triton: the trial
    # is stored as failed with the server's own one-line cause, and the study goes on.
    assert "Model Runner V1 does not support: dspark speculative decoding" in by_method["dspark"].failure_cause

    assert answer["winner"]["config"] in [r.config for r in rows]  # a measured config, or none
    assert answer["baseline"]["tokens_per_s"] == pytest.approx(by_method["baseline"].tokens_per_s)


def test_mtp_drafts_with_the_target_s_own_mtp_layer(tmp_path, tiny_models):
    workload = ROOT / "workloads" / "code.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "measure", "--workload", str(workload),
         "--model", str(tiny_models / "mtp-target"), "--method", "mtp", "--k", "1",
         "--concurrency", "2", "--log-dir", str(tmp_path / "logs"), "--json", *SERVER_ARGS],
        capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_,) = json.loads(result.stdout)["runs"]
    # The MiMo-style target's MTP layer was distilled to propose the token after next.
    assert run_["acceptance"]["mean_acceptance_length"] > 1.3, run_["acceptance"]
