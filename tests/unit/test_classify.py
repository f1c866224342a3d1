"""The learned workload-type classifier: the issue's examples, unsure requests, user labels."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from tuner.errors import UsageError
from tuner.workload import load_workload
from tuner.workload.classify import (DEFAULT_MIN_CONFIDENCE, MIXED, classify, guess_all,
                                     split_requests, type_counts)
from tuner.workload.model import Request
from tuner.workload.stats import stats_dict, workload_stats

ROOT = Path(__file__).resolve().parents[2]


def chat(text: str, system: str | None = None) -> Request:
    messages = ({"role": "system", "content": system},) if system else ()
    return Request(line=1, messages=(*messages, {"role": "user", "content": text}))


NEWS = (
    "Rescue teams worked through the night on Sunday after heavy rain flooded large parts of the "
    "river valley, forcing more than 2,000 residents from their homes. The regional government "
    "said three bridges had been closed and that schools in four towns would stay shut until at "
    "least Wednesday. Forecasters warned that another band of storms could arrive later in the "
    "week, and farmers said the water had already destroyed much of the spring harvest. The "
    "prime minister is expected to visit the area on Monday and to announce emergency funding "
    "for families who lost their homes. Insurance companies said it was too early to estimate "
    "the cost, but early figures suggested it could be the most expensive flood in a decade.")
MEETING = "\n".join([
    "Project Manager: Okay, so this is our second meeting about the new remote control.",
    "Marketing: Right. I looked at what users said in the survey.",
    "Marketing: Most of them find current remotes ugly and they lose them all the time.",
    "Industrial Designer: We could use a rubber case, it is cheaper and it does not break.",
    "User Interface: And fewer buttons. People only use about ten percent of them.",
    "Project Manager: Good. The budget is still twelve euros fifty per unit.",
    "Industrial Designer: Then no LCD screen, that would cost too much.",
    "Marketing: A voice recogniser would be trendy, younger people liked that idea.",
    "Project Manager: Let's decide on that next time. Craig, can you draft the layout?",
    "User Interface: Sure, I'll have it for the next meeting.",
])
CONTEXT = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It was "
           "designed by Gustave Eiffel's company and completed in 1889 for the World's Fair. "
           "It is 330 metres tall and was the tallest man-made structure in the world until 1930.")
LEETCODE = (
    "Given an integer array nums, return the length of the longest strictly increasing "
    "subsequence.\n\nExample 1:\n\nInput: nums = [10,9,2,5,3,7,101,18]\nOutput: 4\nExplanation: "
    "The longest increasing subsequence is [2,3,7,101], therefore the length is 4.\n\nExample 2:"
    "\n\nInput: nums = [0,1,0,3,2,3]\nOutput: 4\n\nConstraints:\n\n1 <= nums.length <= 2500\n"
    "-10^4 <= nums[i] <= 10^4")

# Every example issue 32 quotes (the news story, meeting and retrieved context are stand-ins for
# the material the issue elides), none of them in the training data.
ISSUE_EXAMPLES = [
    ("How would you say this in Russian? I will be late for dinner tonight.", "translation"),
    ("Can you put this English text into Czech?\n\nThe museum is closed on Mondays.", "translation"),
    ("German → English: Der Zug fährt um acht Uhr vom Hauptbahnhof ab.", "translation"),
    (NEWS + "\n\nWhat's the gist of this news story?", "summarization"),
    (MEETING + "\n\nSummarize the whole meeting.", "summarization"),
    ("Use the following pieces of context to answer the question at the end. If you don't know "
     "the answer, just say that you don't know, don't try to make up an answer.\n\n" + CONTEXT
     + "\n\nQuestion: How tall is the Eiffel Tower?\nHelpful Answer:", "rag"),
    ("Context information is below.\n---------------------\n" + CONTEXT + "\n"
     "---------------------\nGiven the context information and not prior knowledge, answer the "
     "query.\nQuery: When was the tower completed?\nAnswer: ", "rag"),
    ("What is the least common multiple of 72 and 96?", "math"),
    ("Implement a queue data structure using two stacks in Python.", "code"),
    (LEETCODE, "code"),
]


@pytest.mark.parametrize(("text", "expected"), ISSUE_EXAMPLES)
def test_the_issues_examples(text, expected):
    assert classify(chat(text)) == expected


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (chat("What is the capital of Australia?"), "chat"),
        (Request(line=1, prompt="def add(a, b):\n    return "), "code"),
        # A completion that is no task of its own is "other", not chat.
        (Request(line=1, prompt="Once upon a time, in a village by the sea,"), "other"),
    ],
)
def test_plain_requests(request_, expected):
    assert classify(request_) == expected


def test_a_lines_own_type_wins_whatever_it_says():
    labelled = Request(line=1, prompt="What is 17 * 23?", type="autocomplete")
    assert classify(labelled) == "autocomplete"
    assert guess_all([labelled])[0].labelled and guess_all([labelled])[0].confidence is None


def test_unsure_requests_go_to_mixed_and_the_threshold_decides():
    requests = [chat(text) for text, _ in ISSUE_EXAMPLES]
    confidences = [g.confidence for g in guess_all(requests, 0)]
    middle = sorted(confidences)[len(confidences) // 2]
    guesses = guess_all(requests, middle)
    # Exactly the requests whose best probability is under the threshold are set apart.
    assert [g.type == MIXED for g in guesses] == [c < middle for c in confidences]
    assert 0 < sum(g.type == MIXED for g in guesses) < len(requests)
    assert all(g.type != MIXED for g in guess_all(requests, 0))
    assert all(g.type == MIXED for g in guess_all(requests, 1))
    groups = split_requests(requests, middle)
    assert all(r.type == MIXED for r in groups[MIXED])
    counts = type_counts([*requests, Request(line=9, prompt="x", type="mine")], middle)
    assert counts.mixed == len(groups[MIXED]) and counts.labelled == {"mine": 1}


def test_the_instruction_lines_weigh_the_same_beside_a_long_text():
    # type_model.py: the first and last lines have feature blocks of their own, each normalised
    # on its own, so the request's own words count as much before a long article as alone.
    from tuner.workload.type_model import (CHAR_FEATURES, LINE_FEATURES, WORD_FEATURES, features,
                                           request_view)

    short = chat("Summarise this.\nThe vote was close.")
    long = chat("Summarise this.\n" + NEWS * 3 + "\nThe vote was close.")
    rows = features([request_view(short), request_view(long)]).toarray()
    lines = slice(WORD_FEATURES + CHAR_FEATURES, WORD_FEATURES + CHAR_FEATURES + 2 * LINE_FEATURES)
    assert rows[0, lines] == pytest.approx(rows[1, lines])
    assert rows[0, lines].any()
    # The body's own blocks do differ: it is only the instruction lines that are kept apart.
    assert rows[0, :WORD_FEATURES] != pytest.approx(rows[1, :WORD_FEATURES])


def test_a_model_fitted_elsewhere_can_be_asked():
    # scripts/train_classifier.py --loso guesses through guess_all with the model it fitted.
    from tuner.workload.type_model import TypeModel, shipped_model

    shipped = shipped_model()
    flipped = TypeModel(shipped.labels[::-1], np.arange(len(shipped.dense)),
                        shipped.dense[:, ::-1], shipped.bias[::-1])
    requests = [chat(text) for text, _ in ISSUE_EXAMPLES]
    assert [g.type for g in guess_all(requests, 0, model=flipped)] == \
        [g.type for g in guess_all(requests, 0)]
    ones = TypeModel(("chat", "code"), np.arange(len(shipped.dense)),
                     np.zeros((len(shipped.dense), 2)), np.array([0.0, 1.0]))
    assert {g.type for g in guess_all(requests, 0, model=ones)} == {"code"}


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_a_threshold_outside_0_1_is_one_sentence(bad):
    with pytest.raises(UsageError, match="--min-confidence must be a probability between 0 and 1"):
        classify(chat("hi"), bad)


def test_the_cli_default_threshold_is_the_documented_one():
    import inspect

    from tuner.cli import traffic as cli

    for command in (cli.workload_split, cli.workload_stats_command):
        default = inspect.signature(command).parameters["min_confidence"].default
        assert default == DEFAULT_MIN_CONFIDENCE
    assert f"default {DEFAULT_MIN_CONFIDENCE:g}" in (ROOT / "README.md").read_text()


def test_stats_count_the_guesses_and_the_unsure(tmp_path):
    lines = [{"messages": [{"role": "user", "content": text}]} for text, _ in ISSUE_EXAMPLES]
    lines.append({"prompt": "x", "type": "mine"})
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    figures = stats_dict(workload_stats(load_workload(path), min_confidence=0))
    guessed = figures["classified"]["guessed"]
    assert figures["types"] == {"mine": 1} and sum(guessed.values()) == len(ISSUE_EXAMPLES)
    assert guessed.get(MIXED, 0) == 0 and guessed["translation"] == 3
    everything_unsure = workload_stats(load_workload(path), min_confidence=1).classified
    assert everything_unsure.mixed == len(ISSUE_EXAMPLES)


def test_split_cli_reports_how_many_went_to_mixed(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n"
                            for text, _ in ISSUE_EXAMPLES))
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "workload", "split", str(path),
                          "--out", str(tmp_path / "s"), "--min-confidence", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"{len(ISSUE_EXAMPLES)} of {len(ISSUE_EXAMPLES)} requests went to mixed" in run.stdout
    assert len(load_workload(tmp_path / "s" / "mixed.jsonl")) == len(ISSUE_EXAMPLES)
    bad = subprocess.run([sys.executable, "-m", "tuner.cli", "workload", "split", str(path),
                          "--out", str(tmp_path / "s"), "--min-confidence", "2"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--min-confidence must be a probability between 0 and 1" in bad.stderr


# The capture proxy's real server and fake upstream, from its own tests.
_spec = importlib.util.spec_from_file_location("capture_tests", Path(__file__).with_name("test_capture.py"))
_capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_capture)
upstream = _capture.upstream


def test_the_capture_proxy_records_the_clients_label(upstream, tmp_path):
    out = tmp_path / "cap.jsonl"
    capture = _capture.Capture(_capture.settings(upstream, out, max_requests=3, workload_type="chat"))
    body = {"model": "m", "prompt": "What is 2 + 2?", "max_tokens": 2}
    for header in ({"X-Workload-Type": "support-bot"}, {}, {"X-Workload-Type": "../etc"}):
        assert httpx.post(capture.url + "/v1/completions", json=body, headers=header).status_code == 200
    capture.wait()
    # The header wins over --type; a label that is not a safe file name is not recorded.
    assert [r.type for r in load_workload(out).requests] == ["support-bot", "chat", "chat"]
    assert split_requests(load_workload(out).requests).keys() == {"support-bot", "chat"}
