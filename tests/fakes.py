"""Stand-ins for a measurement, for unit tests of the rooms above the trial (search, web):
the real measurement is tested on the real vLLM server in tests/integration."""

from tuner.metrics import Acceptance
from tuner.replay import Percentiles, ReplaySummary
from tuner.measure.trial import Measurement, NoProgress, RunResult, ServerRecord


class Quiet(NoProgress):
    def trial_started(self, *args):
        pass

    def trial_finished(self, row):
        pass


def fake_measurement(spec, tokens_per_s, failed=0, per_position=None, load="concurrency 1", tpot=0.01):
    p = Percentiles(tpot, tpot, tpot * 2, tpot * 3)
    summary = ReplaySummary(requests=10, completed=10 - failed, failed=failed, duration_s=1.0,
                            output_tokens=int(tokens_per_s), output_tokens_per_s=tokens_per_s,
                            requests_per_s=10.0, ttft=p, tpot=p, e2e=p,
                            errors=(f"{failed} x HTTP 500",) if failed else ())
    server = ServerRecord(command=["vllm"], log_path="/tmp/x.log", startup_s=1.0, pid=1, port=1,
                          vllm_version="0.32.0")
    acceptance = None
    if per_position is not None:
        acceptance = Acceptance(100, 100 * len(per_position), int(100 * sum(per_position)),
                                sum(per_position) / len(per_position), 1 + sum(per_position),
                                tuple(per_position))
    run = RunResult(repeat=0, summary=summary, acceptance=acceptance,
                    server_generation_tokens=int(tokens_per_s), requests=[])
    return Measurement(model="m", workload_path="w.jsonl", workload_type="code",
                       spec=spec.to_vllm() if spec else None, load=load, warmup_requests=0,
                       server=server, runs=[run], host="h", started_at="", finished_at="")


def stored_request(**flags) -> dict:
    """A schedule's request as `tuner schedule add` stores it (no name), for a workload and model
    that need not exist."""
    from tuner.plan.study_plan import build_request

    flags = {"workload": "/w/code.jsonl", "model": "m", **flags}
    return build_request(**flags).to_json()
