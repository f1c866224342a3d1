"""vLLM's reason when its engine dies while serving, from the server log (a real one: the CPU
build's engine dying at the first verification with the synthetic rejection sampler)."""

import sys
from pathlib import Path

import pytest

from tuner.engine import ServerOptions
from tuner.engine.log_cause import DEATH_TAIL_LINES, death_cause, engine_died, failure_cause, read_tail
from tuner.engine.server import VllmServer

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


# A stand-in for vLLM's API server: /health answers what the file STATUS says ("503 once": one
# 503, then 200 again; "exit": no answer, the process exits), 200 without the file.
FAKE = r'''
import os, socket, struct, sys, http.server
port = int(sys.argv[sys.argv.index("--port") + 1])
status_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "STATUS")
class Health(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the client closes first: no TIME_WAIT left on the port at stop
    def do_GET(self):
        words = open(status_file).read().split() if os.path.exists(status_file) else ["200"]
        if "exit" in words:  # gone mid-request; a reset leaves no TIME_WAIT on the port
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            os._exit(1)
        self.send_response(int(words[0]))
        self.send_header("Content-Length", "0")
        self.end_headers()
        if "once" in words:
            os.remove(status_file)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Health).serve_forever()
'''


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE)
    server = VllmServer("m", None, ServerOptions(server_cmd=f"{sys.executable} {script} {{model}}",
                                                 log_dir=tmp_path / "logs", stop_grace_s=2))
    with server:
        yield server, tmp_path / "STATUS"


def test_a_server_that_answers_health_is_serving(fake):
    server, _ = fake
    assert not server.engine_gone(dying_s=0.5)


def test_an_engine_death_in_the_log_is_gone_while_the_api_server_still_answers(fake):
    server, _ = fake
    with server.log_path.open("a") as log:
        log.write("(EngineCore pid=7) ERROR 12-06 02:36:00 [core.py:1512] EngineCore encountered a fatal error.\n"
                  f"(EngineCore pid=7) ERROR 12-06 02:36:00 [core.py:1512] {REASON}\n")
    assert server.engine_gone(dying_s=0.5)
    assert server.death_cause() == REASON


def test_a_failing_health_check_is_gone_once_the_server_exits(fake):
    server, status = fake
    status.write_text("exit")
    assert server.engine_gone(dying_s=5)
    assert not server.alive()


def test_a_health_check_that_fails_once_is_a_busy_moment_not_a_death(fake):
    server, status = fake
    status.write_text("503 once")
    assert not server.engine_gone(dying_s=0.5)
    assert server.alive()
