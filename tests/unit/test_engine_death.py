"""vLLM's reason when its engine dies while serving, from the server log (a real one: the CPU
build's engine dying at the first verification with the synthetic rejection sampler)."""

from pathlib import Path

from tuner.engine.log_cause import DEATH_TAIL_LINES, death_cause, engine_died, failure_cause, read_tail

DATA = Path(__file__).resolve().parents[1] / "data"
LOG = DATA / "log_cpu_synthetic_engine_death.log"
REASON = "AssertionError: Synthetic acceptance not supported with CPU sampling"


def test_the_engines_own_error_is_the_cause():
    lines = read_tail(LOG, DEATH_TAIL_LINES)
    assert engine_died(lines)
    assert death_cause(lines) == REASON


def test_the_cause_is_found_below_a_traceback_per_request_the_server_was_serving(tmp_path):
    # At concurrency 32 the API server logs a traceback for each request cut off after the
    # engine's own: 40 of them put the root error thousands of lines above the log's end.
    lines = LOG.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if "Engine Exception caught" in line)
    end = next(i for i, line in enumerate(lines) if "500 Internal Server Error" in line) + 1
    long = tmp_path / "server.log"
    long.write_text("".join(lines[:end] + lines[start:end] * 40 + lines[end:]))
    assert len(long.read_text().splitlines()) > 1500
    assert failure_cause(read_tail(long)) is None  # a start's tail of 400 lines misses it
    assert death_cause(read_tail(long, DEATH_TAIL_LINES)) == REASON


def test_an_error_the_server_lived_through_earlier_is_not_the_cause():
    served = ["(APIServer pid=1) ERROR 12-06 02:30:00 [serving.py:1] ValueError: This model's maximum "
              "context length is 1024 tokens\n", "INFO:     127.0.0.1:1 - \"POST /v1/completions\" 400\n"]
    lines = served + read_tail(LOG, DEATH_TAIL_LINES)
    assert failure_cause(lines).startswith("ValueError")
    assert death_cause(lines) == REASON


def test_a_log_without_an_engine_death():
    lines = ["(APIServer pid=1) INFO 12-06 02:30:00 [api_server.py:1] Starting vLLM API server\n"]
    assert not engine_died(lines) and death_cause(lines) is None
