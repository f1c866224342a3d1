"""vLLM's adaptive verification on the REAL vLLM server's build (CPU, vLLM 0.32): a study asked
for it measures each drafter fixed and adaptive; this build runs Model Runner V1, which refuses
adaptive verification (and DSpark), and the tuner knows that from the installed vLLM's own rules
before any start: those configs are stored as failed with vLLM's words, no server is started for
them and none counts as a start (issue 47, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reference_study import ENV, SERVER_ARGS, short_code_workload
from tuner.store import ResultStore, open_database

pytestmark = pytest.mark.integration

V1_REFUSES_ADAPTIVE = "Model Runner V1 does not support: adaptive draft verification"


def test_a_study_with_adaptive_verification_stores_vllm_s_refusal_without_a_start(tmp_path, tiny_models):
    db = f"sqlite:///{tmp_path / 'tuner.db'}"
    logs = tmp_path / "logs"
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "optimize",
         "--workload", str(short_code_workload(tmp_path, requests=4, max_tokens=24)),
         "--model", str(tiny_models / "target"), "--method", "eagle3",
         "--draft", f"eagle3={tiny_models / 'eagle3'}", "--draft", str(tiny_models / "dspark"), "--k", "2",
         "--adaptive-verification", "--strategy", "grid", "--warmup", "1", "--db", db,
         "--log-dir", str(logs), "--json", *SERVER_ARGS],
        capture_output=True, text=True, env=ENV, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout)
    rows = {r.label.split(" draft=")[0]: r for r in ResultStore(open_database(db)).trials()}
    assert {label: r.status for label, r in rows.items()} == {
        "baseline": "complete", "eagle3 k=2": "complete", "eagle3 k=2 adaptive": "failed",
        "dspark k=4": "failed", "dspark k=4 adaptive": "failed"}, [r.failure_cause for r in rows.values()]
    refused = {label: r for label, r in rows.items() if r.status == "failed"}
    assert V1_REFUSES_ADAPTIVE in refused["eagle3 k=2 adaptive"].failure_cause
    assert "Model Runner V1 does not support: dspark speculative decoding" in refused["dspark k=4"].failure_cause
    assert ("Model Runner V1 does not support: dspark speculative decoding, adaptive draft verification"
            in refused["dspark k=4 adaptive"].failure_cause)
    for r in refused.values():  # known before a start: no server, no log, not a start
        assert r.failure_cause.startswith("not started: the installed vLLM refuses") and r.server_log_path is None
    assert answer["server_starts"] == 2 == len(list(logs.glob("*.log")))
    notes = answer["notes"]
    assert any(n.startswith("eagle3 draft=") and "with adaptive verification was not measured" in n
               and V1_REFUSES_ADAPTIVE in n for n in notes), notes
