"""What the tuner hands a vLLM server: the synthetic-acceptance fields and its environment."""

import json
import sys

import pytest

from tuner.engine import ServerOptions, SpecConfig
from tuner.engine.server import VllmServer, parse_synthetic_acceptance
from tuner.errors import ServerStartError, UsageError


def spec_json(server: VllmServer) -> dict:
    argv = server.command()
    return json.loads(argv[argv.index("--speculative-config") + 1])


def test_synthetic_acceptance_is_cut_to_k_and_extended_at_its_last_ratio():
    rates = parse_synthetic_acceptance("0.8, 0.6,0.45")
    options = ServerOptions(server_cmd="vllm serve {model}", synthetic_acceptance=rates)
    short = spec_json(VllmServer("m", SpecConfig("eagle3", 2, draft_model="d"), options))
    assert short == {"method": "eagle3", "model": "d", "num_speculative_tokens": 2,
                     "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.8, 0.6]}
    longer = spec_json(VllmServer("m", SpecConfig("eagle3", 5, draft_model="d"), options))
    assert longer["synthetic_acceptance_rates"] == [0.8, 0.6, 0.45, 0.3375, 0.2531]
    assert "--speculative-config" not in VllmServer("m", None, options).command()


@pytest.mark.parametrize("text", ["0.5,0.7", "1.2", "a,b", ""])
def test_a_profile_that_grows_or_leaves_0_1_is_refused_in_one_sentence(text):
    with pytest.raises(UsageError, match="never grow"):
        parse_synthetic_acceptance(text)


def test_the_server_runs_without_pythondontwritebytecode(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    script = tmp_path / "fake_vllm.py"
    script.write_text("import os, sys\nprint('bytecode off:', os.environ.get('PYTHONDONTWRITEBYTECODE'))\n"
                      "print('kept:', os.environ.get('TUNER_TEST_KEPT'))\nsys.exit(3)\n")
    monkeypatch.setenv("TUNER_TEST_KEPT", "yes")
    server = VllmServer("m", None, ServerOptions(server_cmd=f"{sys.executable} {script} {{model}}",
                                                 log_dir=tmp_path / "logs"))
    with pytest.raises(ServerStartError):
        server.start()
    log = server.log_path.read_text()
    assert "bytecode off: None" in log and "kept: yes" in log
