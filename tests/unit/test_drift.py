"""Drift per workload type: code and chat tuned for one model. Live series that carry their type
(a workload_type label, or a served model name per type) are compared with that type's
reference; a series that does not is compared with the tuned traffic mix."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tuner.errors import TunerError
from tuner.metrics.prometheus import LiveAcceptance
from tuner.schedule.drift import DriftWatch, Reference, combined, shares
from tuner.schedule.config import ServeSettings
from tuner.schedule.service import TuningService
from tuner.store import Database, ScheduleRow

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
HOLD = 60

# What production counters read per type over one window when each type runs at its tuned
# level (k = 3): code accepts 2.4 of 3 per draft, chat 1.2 of 3.
CODE = {"drafts": 100, "accepted": 240, "draft_tokens": 300}  # rate 0.8, length 3.4
CHAT = {"drafts": 100, "accepted": 120, "draft_tokens": 300}  # rate 0.4, length 2.2


def figures(*counters: dict) -> LiveAcceptance:
    """What the PromQL of prometheus.queries gives for the summed counters."""
    accepted = sum(c["accepted"] for c in counters)
    return LiveAcceptance(accepted / sum(c["draft_tokens"] for c in counters),
                          1 + accepted / sum(c["drafts"] for c in counters))


def output_tokens(c: dict) -> int:
    return c["drafts"] + c["accepted"]  # each draft step emits its accepted tokens plus one


def workload(path: Path, tokens: int, requests: int = 4, span_s: float | None = None) -> str:
    lines = [{"prompt": f"p{i}", "output_tokens": tokens // requests,
              **({"arrival_s": span_s * i / (requests - 1)} if span_s is not None else {})}
             for i in range(requests)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def ref(id: int, workload_type: str, rate: float, length: float, workload: str = "/w",
        live_name: str | None = "llama") -> Reference:
    schedule = ScheduleRow(id, f"{workload_type}-nightly", "0 2 * * *", "UTC", "m", workload, workload_type,
                           [], None, live_name, True, T0, None)
    return Reference(schedule, f"{workload_type} study", f"{workload_type} config", rate, length)


def twice(watch: DriftWatch, refs, live) -> list:
    """Two checks a hold time apart: what a drift that lasts reports."""
    return watch.check(T0, refs, live) + watch.check(T0 + timedelta(seconds=HOLD), refs, live)


def test_each_type_at_its_own_level_is_no_drift_and_a_drop_is_that_types_alone():
    refs = [ref(1, "code", 0.8, 3.4), ref(2, "chat", 0.4, 2.2)]
    watch = DriftWatch(margin=0.15, hold_s=HOLD)
    at_level = {"llama": {"code": figures(CODE), "chat": figures(CHAT)}}
    assert twice(watch, refs, at_level) == []

    chat_dropped = {"llama": {"code": figures(CODE), "chat": figures({**CHAT, "accepted": 30})}}
    found = twice(watch, refs, chat_dropped)
    assert [f.reference.schedule.workload_type for f in found] == ["chat"]
    assert found[0].reference.rate == 0.4 and found[0].live.rate == pytest.approx(0.1)
    assert found[0].text.startswith("live acceptance of llama (workload_type=chat) (rate 0.10")
    assert "stayed below the tuned chat config" in found[0].text
    assert watch.below_since == {("llama", "chat"): T0 + timedelta(seconds=HOLD)}


def test_a_served_model_name_per_type_carries_the_type_too():
    refs = [ref(1, "code", 0.8, 3.4, live_name="llama-code"),
            ref(2, "chat", 0.4, 2.2, live_name="llama-chat")]
    watch = DriftWatch(margin=0.15, hold_s=HOLD)
    assert twice(watch, refs, {"llama-code": {"": figures(CODE)}, "llama-chat": {"": figures(CHAT)}}) == []
    found = twice(watch, refs, {"llama-code": {"": figures({**CODE, "accepted": 60})},
                                "llama-chat": {"": figures(CHAT)}})
    assert [f.reference.schedule.name for f in found] == ["code-nightly"]


def test_untyped_traffic_is_compared_with_the_tuned_mix(tmp_path):
    code = workload(tmp_path / "code.jsonl", output_tokens(CODE) * 10)
    chat = workload(tmp_path / "chat.jsonl", output_tokens(CHAT) * 10)
    refs = [ref(1, "code", 0.8, 3.4, code), ref(2, "chat", 0.4, 2.2, chat)]
    live = figures(CODE, CHAT)  # both types behind one name, no label: one sum
    # Against each type's own reference, code's would be drift that is not there.
    assert DriftWatch(0.15, HOLD).is_below(refs[0], live)

    mix = combined(refs)
    assert (mix.rate, mix.length) == (pytest.approx(live.rate), pytest.approx(live.length))
    assert mix.config_label == "traffic mix (code 61% code config, chat 39% chat config)"
    watch = DriftWatch(margin=0.15, hold_s=HOLD)
    assert twice(watch, refs, {"llama": {"": live}}) == []

    # Chat's acceptance drops: the sum falls below the mix, and which type fell cannot be told.
    found = twice(watch, refs, {"llama": {"": figures(CODE, {**CHAT, "accepted": 30})}})
    assert [f.reference.schedule.workload_type for f in found] == ["code", "chat"]
    assert all(f.reference.rate == pytest.approx(live.rate) for f in found)
    assert "stayed below the tuned traffic mix (code 61%" in found[0].text


def test_one_tuned_type_behind_the_name_keeps_its_own_reference():
    only = ref(1, "code", 0.8, 3.4, workload="/no/such/file.jsonl")  # no share is needed
    assert combined([only]) is only
    # A series labelled with a type nobody tuned for the model is not compared.
    watch = DriftWatch(margin=0.15, hold_s=0)
    assert watch.check(T0, [only], {"llama": {"summarize": LiveAcceptance(0.1, 1.1)}}) == []


def test_traffic_shares_are_output_tokens_per_second_of_the_captures(tmp_path):
    # Same tokens, code captured over 10 s and chat over 30 s: code is 3/4 of the traffic.
    timed = [ScheduleRow(i, t, "", "UTC", "m", workload(tmp_path / f"{t}.jsonl", 400, span_s=s), t, [], None,
                         None, True, T0, None) for i, (t, s) in enumerate([("code", 10.0), ("chat", 30.0)])]
    assert shares(timed) == pytest.approx([0.75, 0.25])
    # Without arrival times: output tokens.
    (tmp_path / "chat.jsonl").write_text('{"prompt": "a", "max_tokens": 100}\n{"prompt": "b"}\n')
    assert shares(timed) == pytest.approx([2 / 3, 1 / 3])  # code's 400 against chat's 2 x 100
    # A workload file that is gone: one sentence naming it.
    (tmp_path / "chat.jsonl").unlink()
    with pytest.raises(TunerError, match="chat.jsonl"):
        shares(timed)


def test_the_service_retunes_only_the_drifting_type(tmp_path, monkeypatch):
    database = Database.open(f"sqlite:///{tmp_path / 'tuner.db'}")
    jobs = database.jobs
    rows = [jobs.add_schedule(name=f"{t}-nightly", cron="0 2 1 1 *", timezone="UTC", model="m",
                              workload=f"/w/{t}", workload_type=t, request={}, live_model_name="llama")
            for t in ("code", "chat")]
    levels = {"code": (0.8, 3.4), "chat": (0.4, 2.2)}

    class Source:  # stands in for Prometheus
        def read(self):
            return {"llama": {"code": figures(CODE), "chat": figures({**CHAT, "accepted": 30})}}

    service = TuningService(ServeSettings(log_dir=tmp_path, drift_for=HOLD), database)
    service.source = Source()
    # The references as the store would give them (their own tests are in test_schedule.py).
    monkeypatch.setattr("tuner.schedule.service.references", lambda store, schedules: [
        Reference(s, f"{s.workload_type} study", "ngram k=3", *levels[s.workload_type]) for s in schedules])
    assert service.check_drift(T0) == []
    queued = service.check_drift(T0 + timedelta(seconds=HOLD))
    assert [j.schedule_name for j in queued] == ["chat-nightly"] and queued[0].reason == "drift"
    (event,) = jobs.drift_events()
    assert event.live_model_name == "llama" and event.tuned_acceptance_rate == 0.4
    assert event.job_id == queued[0].id and "(workload_type=chat)" in event.note
    assert rows[0].id not in {j.schedule_id for j in jobs.jobs()}
    database.dispose()
