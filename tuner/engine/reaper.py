"""Run the vLLM server as a child and take its whole process group down when the tuner dies.

``python -m tuner.engine.reaper --grace S --parent PID -- ARGV...`` leads the server's process group
(the tuner starts it with ``start_new_session``), starts ARGV in that group and exits with its
code. When the tuner (PID) is gone (killed, even by SIGKILL: this process's parent is no longer
PID) or asks it to stop (SIGTERM), it sends SIGTERM to the group and SIGKILL after a grace
period. The tuner names its PID because it can die before this process has read its own
parent: a reaper that took its parent at start as the one to watch then watched init, and left
a server running (seen in the fault suite: the tuner SIGKILLed as its server started). vLLM
itself is not enough: a SIGTERM that reaches its API server while the engine is still starting
can leave the API server and its engine processes running, holding the GPUs
(docs/lab/notes-from-code.md#tunerenginereaper).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

POLL_S = 0.5


def _take_down_group(server: subprocess.Popen[bytes], grace_s: float) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches this process too
    os.killpg(0, signal.SIGTERM)
    try:
        server.wait(timeout=grace_s)  # vLLM's own shutdown first
    except subprocess.TimeoutExpired:
        pass
    os.killpg(0, signal.SIGKILL)  # whatever is left (engine processes); this process goes with it


def main(args: list[str]) -> int:
    if len(args) < 6 or args[0] != "--grace" or args[2] != "--parent" or args[4] != "--":
        print("usage: python -m tuner.engine.reaper --grace SECONDS --parent PID -- COMMAND [ARGS...]",
              file=sys.stderr)
        return 2
    grace_s, parent, argv = float(args[1]), int(args[3]), args[5:]
    stop_asked = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop_asked
        stop_asked = True

    signal.signal(signal.SIGTERM, on_term)
    server = subprocess.Popen(argv)
    while True:
        try:
            code = server.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if stop_asked or os.getppid() != parent:
                _take_down_group(server, grace_s)
            continue
        return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
