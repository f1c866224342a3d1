"""Each replay of a study: acceptance as its requests' streams showed it, beside /metrics.

    python benchmarks/gpu_acceptance_table.py sqlite:///run/tuner.db

Reads what `tuner optimize` stored (tuner_trial_runs): the /metrics mean acceptance length of the
replay's window and the streams' decode steps and accepted drafts (tuner.replay.acceptance). With
one engine step per streamed chunk, 1 + accepted / steps from the streams equals /metrics' figure
for a drafter that drafts every step (eagle3); a stream that coalesces steps shows fewer, larger
steps, and so a higher figure. Also each replay's marks (tuner.decide.marks).
"""

from __future__ import annotations

import sys

from sqlalchemy import select
from sqlalchemy.orm import Session

from tuner.store.db import open_read_only
from tuner.store.models import TrialRecord, TrialRun


def main(url: str) -> None:
    with Session(open_read_only(url)) as session:
        rows = session.execute(select(TrialRecord.label, TrialRun).join(TrialRun.trial)
                               .order_by(TrialRecord.id, TrialRun.id)).all()
    print("| config | load | repeat | /metrics acceptance length | streams: requests / decode steps / accepted "
          "| streams' acceptance length | streams / /metrics | tokens/s | marks |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, run in rows:
        stream = run.request_acceptance or {}
        steps, accepted = stream.get("stream_steps"), stream.get("stream_accepted")
        from_stream = 1 + accepted / steps if steps else None
        counters = run.mean_acceptance_length
        ratio = f"{from_stream / counters:.3f}" if from_stream and counters else "-"
        print(f"| {label} | {run.load} | {run.repeat} | {_num(counters)} | "
              f"{stream.get('requests', '-')} / {steps or '-'} / {accepted if accepted is not None else '-'} | "
              f"{_num(from_stream)} | {ratio} | {run.output_tokens_per_s:.1f} | {', '.join(run.marks or []) or '-'} |")


def _num(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


if __name__ == "__main__":
    main(sys.argv[1])
