"""benchmarks/search_efficiency.py simulates the product's own study loop against the stored
grid table: its stand-in measurement, and a study of each strategy on a small part of the table."""

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from tuner.study import loop as study_module
from tuner.measure.trial import MeasureSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("search_efficiency", ROOT / "benchmarks" / "search_efficiency.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    module.quiet_optuna()
    return module


@pytest.fixture(scope="module")
def table(bench):
    return bench.Table.load_file(bench.TABLE, methods=["ngram"], max_k=4)  # baseline + ngram k=1..4


def test_the_stand_in_returns_the_settings_repeats_each_a_stored_replay(bench, table):
    measure = bench.table_server([table], random.Random(0))
    candidate = table.space.candidates()[3]  # ngram k=3
    settings = MeasureSettings(load=bench.load_spec(table.load), repeats=3)
    [m] = measure("m", candidate.spec, None, settings, None)
    stored = table.runs[table.key_of_config(candidate.spec.to_vllm())]
    assert m.load == table.load == "concurrency 2" and len(m.runs) == 3
    assert all(run.summary.output_tokens_per_s in stored for run in m.runs)
    assert m.acceptance.per_position == tuple(table.profile[table.key_of_config(candidate.spec.to_vllm())])
    smooth = bench.table_server([table], random.Random(0), smooth=True)
    [s] = smooth("m", candidate.spec, None, settings, None)
    assert len({run.summary.output_tokens_per_s for run in s.runs}) == 3  # no repeated value, so no MAD of 0


@pytest.fixture(scope="module")
def databases(bench):
    made = bench.Databases()  # migrated once, copied for each study
    yield made
    made.close()


@pytest.mark.parametrize("strategy", ["guided", "grid", "tpe", "random"])
def test_each_strategy_runs_the_products_loop_and_is_judged_by_its_answer(bench, table, databases, strategy):
    budget = 3 if strategy in ("tpe", "random") else 5
    study = bench.run_study([table], strategy, 1, budget, 0, databases)
    assert study_module.make_sampler.__name__ == "make_sampler"  # the random sampler is put back
    assert study.restarts == len(study.measured[0]) <= budget
    if strategy != "guided":
        assert study.restarts == budget
    assert study.measured[0][0] == table.key_of_config(None)  # the baseline first, as the product does
    assert study.winners[0] in study.measured[0]
    figures = bench.figures([study], table)
    assert figures.restarts_mean == study.restarts and 0 <= figures.regret < 1
