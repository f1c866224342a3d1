"""How many server restarts each search strategy needs to find the grid's best configuration.

Two steps:

  measure   runs the whole grid on the real vLLM server (``tuner optimize --strategy grid``,
            3 replays per config) and exports every config's per-replay tokens/s and acceptance
            profile to benchmarks/data/search_grid.json. Each replay is workloads/code.jsonl four
            times over (192 requests, 12-25 s): with the 48-request file alone a replay lasts
            about 6 s. The tuner and every server it starts run on one core (``--cpu``, default
            the last): left to the scheduler on this 2-core host, one server's replays jumped
            between two speeds (ngram k=4: 528 to 836 tok/s; on one core 707 to 718), so which
            config was best was decided by noise. The unpinned table of 2026-11-30 is kept as
            search_grid-unpinned.json (``simulate --table``). About 40 min here.
  simulate  runs the product's own study loop (``tuner.study.loop.optimize``: its proposer,
            its noise estimate, its answer by ``choose()``) on the grid, the guided search,
            plain TPE and random search (TPE's loop with Optuna's RandomSampler), many times,
            against that table: ``optimize`` gets a stand-in measurement (``table_server``) that
            answers each trial with ``--repeats`` replays, each one of the config's stored
            replays drawn at random. Every simulated study has a fresh SQLite database, no warm
            start and a seed of its own. Its answer is the winner the product names (the
            baseline when speculation stays off); its regret is how far that config's true
            figure (the median of all its stored replays) falls below the grid's best.
  synthetic does the same on made-up worlds the table does not show, one study per world, as a
            check that the guided search is not fitted to the one table: each drafter's
            acceptance falls geometrically with position and its step time grows as
            a + c * k^b, from flattening (b = 0.5) to steepening (b = 1.5).

  python benchmarks/search_efficiency.py measure
  python benchmarks/search_efficiency.py simulate                # --runs 100: 8 min here, 11 with --repeats 3
  python benchmarks/search_efficiency.py simulate --repeats 3 --smooth
  python benchmarks/search_efficiency.py synthetic               # --worlds 100: 9 min
  python benchmarks/search_efficiency.py synthetic --loads

The machine must be otherwise idle while it measures: on 2 cores a test run beside it moves a
replay's tokens/s by up to 20 %. Configs measured while something else ran can be measured
again and swapped in (the table lists them under "measured_again"):

  python benchmarks/search_efficiency.py measure --db sqlite:///benchmarks/data/grid-again.db --trials 14
  python benchmarks/search_efficiency.py measure --export-only --replace-from sqlite:///benchmarks/data/grid-again.db
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from tuner.engine import SpecConfig
from tuner.errors import TunerError
from tuner.metrics import Acceptance
from tuner.replay import LoadSpec, ReplaySummary
from tuner.study import loop as study_module
from tuner.decide.answer import DEFAULT_NOISE
from tuner.propose.guided import drafter_of, k_of, key_of, mean_noise
from tuner.plan.space import Candidate, SearchSpace, parse_lookup
from tuner.study.loop import OptimizeSettings, optimize
from tuner.decide.stats import mad
from tuner.store import ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings, Measurement, NoProgress, RunResult, ServerRecord, enough_replays
from tuner.workload import Request, Workload

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "benchmarks" / "data" / "search_grid.json"
MODELS = ROOT / ".models"
MODEL = "stored table"
WITHIN = 0.02  # "reaches the grid's answer": within 2 % of its best
LOOSE = 0.05  # also printed: within 5 %, for tables whose noise is larger than 2 %
RUNS = 100  # simulated studies per strategy (simulate): 8 min (--repeats 1) to 11 min (--repeats 3) here
WORLDS = 100  # made-up worlds (synthetic): about 9 min here


WORKLOAD_COPIES = 4


def long_workload(copies: int = WORKLOAD_COPIES) -> Path:
    """workloads/code.jsonl repeated; each copy's prompts get a distinct first line, so no copy
    is served from the prefix cache of another."""
    source = ROOT / "workloads" / "code.jsonl"
    lines = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    out = ROOT / "benchmarks" / "data" / f"code-x{copies}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    span = lines[-1].get("arrival_s", 0.0) + 1.0  # arrivals must not decrease across copies
    with out.open("w") as f:
        for copy in range(copies):
            for line in lines:
                prompt = line["prompt"] if copy == 0 else f"# pass {copy + 1}\n{line['prompt']}"
                arrival = round(line.get("arrival_s", 0.0) + copy * span, 3)
                f.write(json.dumps({**line, "id": f"{line['id']}-{copy + 1}", "prompt": prompt,
                                    "arrival_s": arrival}) + "\n")
    return out


def grid_command(db: str, workload: Path, trials: int = 31) -> list[str]:
    """ngram and draft_model with two drafts of different quality, k = 1..10: 31 configs
    (``trials`` < 31: the first configs in grid order, to measure part of it again)."""
    return [sys.executable, "-m", "tuner.cli", "optimize", "--strategy", "grid",
            "--workload", str(workload), "--type", "code", "--model", str(MODELS / "target"),
            "--method", "ngram", "--method", "draft_model",
            "--draft", f"draft_model={MODELS / 'draft'}", "--draft", f"draft_model={MODELS / 'draft-weak'}",
            "--k", "1-10", "--trials", str(trials), "--repeats", "3", "--warmup", "8", "--concurrency", "2",
            "--db", db, "--server-arg=--enforce-eager", "--server-arg=--max-model-len=1024"]


def pin_to(cpu: int | None):
    """A preexec function that keeps the tuner, its client and every vLLM process on one core
    (why: the module docstring). vLLM's CPU build binds its OpenMP thread inside the allowed
    cores, so the engine, the API server and the client take turns on one core instead of
    waking each other across two."""
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def measure(args: argparse.Namespace) -> None:
    if not args.export_only:
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        subprocess.run(grid_command(args.db, long_workload(), args.trials), check=True, env=env,
                       preexec_fn=pin_to(args.cpu))
    export(args.db, args.table, args.replace_from, args.cpu)


def measured_configs(db: str) -> tuple[str, list[dict]]:
    from tuner.store import ResultStore, open_database, upgrade

    upgrade(db)  # a grid measured by an older tuner is brought up to date first
    store = ResultStore(open_database(db))
    rows = [r for r in store.trials() if r.status == "complete"]
    name = rows[0].study_name
    runs = store.run_tokens_per_s(name)
    return name, [{"label": r.label, "config": r.config, "runs": runs[(r.optuna_trial_number, r.load)],
                   "per_position": r.per_position, "tpot_p99_s": r.tpot_p99_s,
                   "vllm_version": r.vllm_version, "load": r.load} for r in rows]


def export(db: str, table: Path, replace_from: list[str] | None = None, cpu: int | None = None) -> None:
    """Write the table; configs measured again in ``replace_from`` databases (a grid study
    over part of the space, same command otherwise) take their runs from there."""
    from tuner.store import ResultStore, open_database

    name, configs = measured_configs(db)
    replaced = []
    for other in replace_from or []:
        _, again = measured_configs(other)
        by_config = {json.dumps(c["config"], sort_keys=True): c for c in again}
        for i, config in enumerate(configs):
            if (found := by_config.get(json.dumps(config["config"], sort_keys=True))) is not None:
                configs[i] = found
                replaced.append(found["label"])
    store = ResultStore(open_database(db))
    record = {"study": name, "host": platform.node(), "cpus": os.cpu_count(),
              "vllm_version": configs[0]["vllm_version"], "load": configs[0]["load"],
              "command": " ".join(grid_command("DB", long_workload())[1:]), "space": store.study_runs(name)[0]["space"],
              "pinned_to_cpu": cpu, "measured_again": replaced, "configs": configs}
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(configs)} configs written to {table}")


def config_json(config: dict | None) -> str:
    return json.dumps(config, sort_keys=True)


@dataclass
class Table:
    """One load's stored figures, by config key: tokens/s of every replay, acceptance profile."""

    space: SearchSpace
    load: str  # the load label, 'concurrency 2'
    runs: dict[str, list[float]] = field(default_factory=dict)  # config key -> tokens/s per replay
    profile: dict[str, list[float] | None] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # the config vLLM takes (JSON) -> config key

    @classmethod
    def load_file(cls, path: Path, methods: list[str] | None = None, max_k: int | None = None) -> Table:
        """``methods``, ``max_k``: simulate on that part of the measured space only."""
        record = json.loads(path.read_text())
        s = record["space"]
        kept = tuple(m for m in s["methods"] if not methods or m in methods)
        if not kept:
            raise SystemExit(f"none of --method {', '.join(methods or [])} is in the table ({', '.join(s['methods'])})")
        space = SearchSpace(methods=kept, ks=tuple(k for k in s["ks"] if max_k is None or k <= max_k),
                            drafts={m: tuple(d) for m, d in s["drafts"].items() if m in kept},
                            ngram_lookup=tuple(parse_lookup(x) for x in s["ngram_lookup"]))
        by_config = {config_json(c["config"]): c for c in record["configs"]}
        table = cls(space, record["load"])
        for candidate in space.candidates():
            found = by_config[config_json(candidate.spec.to_vllm() if candidate.spec else None)]
            table.add(candidate, found["runs"], found["per_position"], found["label"])
        return table

    def add(self, candidate: Candidate, runs: list[float], profile: list[float] | None,
            label: str | None = None) -> None:
        key = key_of(candidate.params)
        self.runs[key], self.profile[key] = runs, profile
        self.labels[key] = label or candidate.label
        self.keys[config_json(candidate.spec.to_vllm() if candidate.spec else None)] = key

    def key_of_config(self, config: dict | None) -> str | None:
        return self.keys.get(config_json(config))

    def truth(self, key: str) -> float:
        return statistics.median(self.runs[key])


# The measurement stand-in, what `optimize` calls instead of `measure_config_at_loads`.

OUTPUT_TOKENS = 24576  # a replay of code-x4.jsonl: 192 requests of 128 tokens


def replay_summary(tokens_per_s: float, requests: int = 192) -> ReplaySummary:
    duration = OUTPUT_TOKENS / tokens_per_s
    return ReplaySummary(requests=requests, completed=requests, failed=0, duration_s=duration,
                         output_tokens=OUTPUT_TOKENS, output_tokens_per_s=tokens_per_s,
                         requests_per_s=requests / duration, ttft=None, tpot=None, e2e=None, errors=())


def acceptance_of(per_position: Sequence[float] | None, drafts: int = 1000) -> Acceptance | None:
    if not per_position:
        return None
    accepted = float(sum(per_position))
    return Acceptance(drafts, drafts * len(per_position), round(drafts * accepted),
                      accepted / len(per_position), 1 + accepted, tuple(per_position))


def table_measurement(spec: SpecConfig | None, load: str, replays: Sequence[float],
                      per_position: Sequence[float] | None) -> Measurement:
    """A trial's Measurement at one load: one RunResult per replay drawn."""
    acceptance = acceptance_of(per_position)
    runs = [RunResult(repeat=i, summary=replay_summary(tps), acceptance=acceptance,
                      server_generation_tokens=OUTPUT_TOKENS, requests=[]) for i, tps in enumerate(replays)]
    server = ServerRecord(command=["stored table"], log_path="", startup_s=0.0, pid=-1, port=0,
                          vllm_version=None)
    return Measurement(model=MODEL, workload_path="stored table", workload_type="code",
                       spec=spec.to_vllm() if spec else None, load=load, warmup_requests=0,
                       server=server, runs=runs, host="stored table", started_at="", finished_at="")


def draw_replay(runs: Sequence[float], rng: random.Random, smooth: bool = False) -> float:
    """One replay of a config: one of its stored replays, drawn at random. ``smooth``: with a
    Gaussian jitter of the stored replays' own spread (Silverman's bandwidth), shrunk towards
    their mean so that the spread stays the stored one (a smoothed bootstrap). Without it, three
    replays drawn from three stored ones repeat a value 78 % of the time, and their MAD is then 0,
    which no real trial shows."""
    value = rng.choice(runs)
    if not smooth or len(runs) < 2:
        return value
    mean, sd = statistics.fmean(runs), statistics.stdev(runs)
    if sd <= 0:
        return value
    h = 0.9 * sd * len(runs) ** -0.2
    return mean + (value - mean + rng.gauss(0.0, h)) / (1 + (h / sd) ** 2) ** 0.5


def table_server(tables: Sequence[Table], rng: random.Random, smooth: bool = False,
                 drawn: list[int] | None = None) -> Callable[..., list[Measurement]]:
    """``measure`` for ``optimize``: at the i-th load of the settings, the i-th table gives a
    Measurement of as many replays of the config as the product's own rule asks for
    (``tuner.measure.trial.enough_replays``: ``--repeats``, or with ``--max-repeats`` until
    ``--precision``), each one of its stored replays drawn at random (with replacement;
    ``smooth``: see ``draw_replay``; ``drawn`` counts them), with its stored
    acceptance profile; the trial's median, MAD and interval then come from the product's own
    ``repeat_stats``. A config the table lacks (the k-by-batch-size schedule of a study at
    several loads) fails as a server that did not start."""

    def measure(model, spec, workload, settings, progress) -> list[Measurement]:
        config = spec.to_vllm() if spec else None
        found = []
        for load, table in zip(settings.loads, tables, strict=True):
            key = table.key_of_config(config)
            if key is None:
                raise TunerError(f"{spec.label if spec else 'baseline'} is not in the stored table")
            replays: list[float] = []
            while not enough_replays(replays, settings, load.label):
                replays.append(draw_replay(table.runs[key], rng, smooth))
            if drawn is not None:
                drawn.append(len(replays))
            found.append(table_measurement(spec, load.label, replays, table.profile[key]))
        return found

    return measure


class Quiet(NoProgress):
    def trial_started(self, *args) -> None:
        pass

    def trial_finished(self, row) -> None:
        pass


class Databases:
    """A fresh SQLite database per simulated study, each a copy of one migrated once (in
    /dev/shm where there is one)."""

    def __init__(self) -> None:
        shm = Path("/dev/shm")
        self.folder = Path(tempfile.mkdtemp(prefix="search-efficiency-", dir=shm if shm.is_dir() else None))
        self.template = self.folder / "template.db"
        url = f"sqlite:///{self.template}"
        open_database(url).dispose()
        optuna_storage(url).engine.dispose()  # Optuna's tables too
        with contextlib.closing(sqlite3.connect(self.template)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.workload = self.folder / "workload.jsonl"
        self.workload.write_text('{"prompt": "stored table"}\n')
        self.count = 0

    def fresh(self) -> Path:
        self.count += 1
        path = self.folder / f"study-{self.count}.db"
        shutil.copyfile(self.template, path)
        return path

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def random_sampler() -> Iterator[None]:
    """The product has no random strategy: this is its loop (``--strategy tpe``: baseline
    first, a config never measured twice, ``choose()``) with Optuna's RandomSampler for TPE."""
    original = study_module.make_sampler
    study_module.make_sampler = lambda options: optuna.samplers.RandomSampler(seed=options.seed)
    try:
        yield
    finally:
        study_module.make_sampler = original


def load_spec(label: str) -> LoadSpec:
    """'concurrency 2' -> its LoadSpec (the stored table is of a closed loop)."""
    mode, _, clients = label.partition(" ")
    if mode != "concurrency" or not clients.isdigit():
        raise SystemExit(f"the table's load {label!r} is not 'concurrency N'")
    return LoadSpec("concurrency", int(clients))


@dataclass(frozen=True)
class Study:
    """One simulated study: what the product answered, and what it measured."""

    restarts: int
    winners: list[str]  # per load: the answer's winner (the baseline when speculation stays off)
    measured: list[list[str]]  # per load: the configs measured, in order
    run_noise: float  # the noise the guided search used at the end (tuner.propose.guided.mean_noise)
    replays: int = 0  # replays drawn in all, over every trial and load


def run_study(tables: Sequence[Table], strategy: str, repeats: int, budget: int, seed: int,
              databases: Databases, noise: float = DEFAULT_NOISE, smooth: bool = False,
              max_repeats: int | None = None, precision: float = 0.02) -> Study:
    """``tuner optimize`` as the CLI runs it (``optimize`` itself), on the stand-in measurement:
    a fresh database, no warm start, ``--repeats``, ``--trials budget``, ``--noise``, ``--seed``;
    ``strategy``: guided, grid, tpe, or random (see ``random_sampler``)."""
    rng = random.Random(seed)
    path = databases.fresh()
    url = f"sqlite:///{path}"
    workload = Workload(path=databases.workload, type="code", requests=(Request(line=1, prompt="stored table"),))
    loads = [load_spec(t.load) for t in tables]
    settings = MeasureSettings(load=loads[0], extra_loads=tuple(loads[1:]), repeats=repeats, warmup=0,
                               max_repeats=max_repeats, precision=precision)
    drawn: list[int] = []
    options = OptimizeSettings(trials=budget, noise=noise, seed=seed, warm_start=False,
                               strategy="tpe" if strategy == "random" else strategy)
    engine = open_database(url)
    storage = optuna_storage(url)
    try:
        store = ResultStore(engine)
        with random_sampler() if strategy == "random" else contextlib.nullcontext():
            outcome = optimize(MODEL, workload, tables[0].space, settings, store, storage, options, Quiet(),
                               measure=table_server(tables, rng, smooth, drawn))
        rows = [r for r in store.trials(study_name=outcome.study_name) if r.kind == "study"]
    finally:
        storage.remove_session()
        storage.engine.dispose()
        engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    winners = [table.key_of_config(outcome.answers[load.label].winner.config) for load, table in zip(loads, tables)]
    measured = [[table.key_of_config(r.config) for r in rows if r.load == load.label and r.status == "complete"]
                for load, table in zip(loads, tables)]
    # What the study loop gave the guided search last (the same expression as in study.py).
    repeated = [r for r in rows if r.repeats > 1 and r.tokens_per_s and r.tokens_per_s_mad is not None]
    spread = mean_noise([r.tokens_per_s_mad / r.tokens_per_s for r in repeated], [r.repeats for r in repeated])
    return Study(outcome.restarts, winners, measured, spread, sum(drawn))


@dataclass(frozen=True)
class Figures:
    restarts_mean: float
    restarts_max: int
    within: float  # share of studies whose answer is within WITHIN of the grid's best
    loose: float  # ... within LOOSE
    regret: float  # mean
    found: float  # share of studies that measured a config within WITHIN (whatever the answer)
    noise: float  # median run noise the guided search used
    replays: float  # mean replays per study


def figures(studies: Sequence[Study], table: Table) -> Figures:
    truth = {key: table.truth(key) for key in table.runs}
    best = max(truth.values())
    regrets = [1 - truth[s.winners[0]] / best for s in studies]
    found = [1 - max(truth[k] for k in s.measured[0]) / best <= WITHIN for s in studies]
    return Figures(statistics.mean(s.restarts for s in studies), max(s.restarts for s in studies),
                   sum(r <= WITHIN for r in regrets) / len(studies), sum(r <= LOOSE for r in regrets) / len(studies),
                   statistics.mean(regrets), sum(found) / len(studies), statistics.median(s.run_noise for s in studies),
                   statistics.mean(s.replays for s in studies))


HEADER = (f"{'strategy':<22} {'restarts mean':>13} {'max':>5} {'of grid':>8} {'within 2%':>10} "
          f"{'within 5%':>10} {'mean regret':>12} {'measured within 2%':>19} {'replays':>8}")


def row(name: str, f: Figures, grid_size: int) -> str:
    return (f"{name:<22} {f.restarts_mean:>13.1f} {f.restarts_max:>5d} {f.restarts_mean / grid_size:>8.0%} "
            f"{f.within:>10.0%} {f.loose:>10.0%} {f.regret:>12.2%} {f.found:>19.0%} {f.replays:>8.1f}")


def quiet_optuna() -> None:
    """The study loop's Optuna warnings (experimental arguments, heartbeats outside
    Study.optimize) would be printed once per simulated study."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")


def replay_rule(args: argparse.Namespace) -> str:
    return f" --max-repeats {args.max_repeats} --precision {args.precision:g}" if args.max_repeats else ""


def simulate(args: argparse.Namespace) -> None:
    quiet_optuna()
    table = Table.load_file(args.table, args.method, args.max_k)
    record = json.loads(args.table.read_text())
    grid_size = len(table.runs)
    truth = {key: table.truth(key) for key in table.runs}
    best_key = max(truth, key=truth.get)
    best = truth[best_key]
    near = [table.labels[k] for k in truth if truth[k] >= best * (1 - WITHIN)]
    part = "" if not (args.method or args.max_k) else (
        f" restricted to {', '.join(table.space.methods)}, k <= {max(table.space.ks)}")
    print(f"table: {args.table}{part} ({grid_size} configs, {record['load']}, measured on "
          f"{record.get('gpu') or str(record['host']) + ' with ' + str(record['cpus']) + ' CPUs'}, "
          f"vLLM {record['vllm_version']})")
    print(f"grid's best: {table.labels[best_key]} at {best:.1f} tok/s (median of its replays); "
          f"within {WITHIN:.0%} of it: {', '.join(near)}")
    spread = statistics.median(mad(r) / statistics.median(r) for r in table.runs.values())
    print(f"run-to-run noise in the table: median relative MAD {spread:.1%}")
    databases = Databases()
    started = time.monotonic()

    def evaluate(name: str, budget: int) -> tuple[Figures, list[Study]]:
        studies = [run_study([table], name, args.repeats, budget, args.seed * 100_003 + run, databases, args.noise,
                             args.smooth, args.max_repeats, args.precision)
                   for run in range(args.runs)]
        return figures(studies, table), studies

    try:
        results, runs = {}, {}
        results["guided"], runs["guided"] = evaluate("guided", grid_size)
        guided_budget = results["guided"].restarts_max  # random and TPE get as many restarts as guided's worst
        quarter = grid_size // 4
        results["grid"], _ = evaluate("grid", grid_size)
        for name in ("random", "tpe"):
            results[f"{name} (budget {guided_budget})"], _ = evaluate(name, guided_budget)
            if quarter != guided_budget:
                results[f"{name} (budget {quarter})"], _ = evaluate(name, quarter)
    finally:
        databases.close()
    elapsed = time.monotonic() - started
    studies = args.runs * len(results)
    print(f"\n{args.runs} simulated studies per strategy (tuner.study.loop.optimize on the stored table), "
          f"--repeats {args.repeats}{replay_rule(args)}, --noise {args.noise:g}, seed {args.seed}; "
          f"{elapsed:.0f} s for {studies} studies ({elapsed / studies:.2f} s each)")
    print(HEADER)
    for name, f in results.items():
        print(row(name, f, grid_size))
    print(f"(within 2%, within 5%, mean regret: the answer's winner, by choose(); measured within 2%: the study "
          f"measured a config within 2% of the best, answer or not; the guided search's run noise: median "
          f"{results['guided'].noise:.2%})")
    g = results["guided"]
    met = g.within >= 0.9 and g.restarts_mean <= grid_size / 4
    print(f"\ntarget (within 2% in >= 90% of runs, <= a quarter of the grid's {grid_size} restarts): "
          f"{'met' if met else 'NOT met'} (guided: {g.within:.0%} of runs, {g.restarts_mean:.1f} restarts)")
    if args.verbose:
        answers = Counter(table.labels[s.winners[0]] for s in runs["guided"])
        print("guided answers: " + ", ".join(f"{label} {n}" for label, n in answers.most_common()))
        paths = Counter(" > ".join(table.labels[k] for k in s.measured[0]) for s in runs["guided"])
        for path, n in paths.most_common(8):
            print(f"  {n:>4} x {path}")


def simulate_loads(args: argparse.Namespace) -> None:
    """One study at every load of ``--table`` (a table per load, the same space): per load, how
    often the answer the product names at that load is within 2 % of that load's grid best, and
    how often the study measured such a config at all."""
    quiet_optuna()
    tables = [Table.load_file(path, args.method, args.max_k) for path in args.table]
    if len({tuple(t.runs) for t in tables}) != 1:
        raise SystemExit("the tables must hold the same configs (one space measured at each load)")
    grid_size = len(tables[0].runs)
    for path, table in zip(args.table, tables):
        truth = {key: table.truth(key) for key in table.runs}
        best = max(truth.values())
        near = [table.labels[k] for k in truth if truth[k] >= best * (1 - WITHIN)]
        print(f"{table.load}: grid's best {table.labels[max(truth, key=truth.get)]} at {best:.0f} tok/s; "
              f"within {WITHIN:.0%}: {', '.join(near)} ({path.name})")
    databases = Databases()
    started = time.monotonic()
    results = {}
    try:
        for name in ("guided", "grid"):
            results[name] = [run_study(tables, name, args.repeats, grid_size, args.seed * 100_003 + run, databases,
                                       args.noise, args.smooth, args.max_repeats, args.precision)
                             for run in range(args.runs)]
    finally:
        databases.close()
    elapsed = time.monotonic() - started
    print(f"\n{args.runs} simulated studies per strategy at {', '.join(t.load for t in tables)} (one study, every "
          f"load), --repeats {args.repeats}{replay_rule(args)}, --noise {args.noise:g}, seed {args.seed}; "
          f"{elapsed:.0f} s")
    print(f"{'strategy':<10} {'restarts mean':>13} {'max':>5} {'replays':>8} "
          + " ".join(f"{t.load + ' answer | measured':>32}" for t in tables) + f" {'every load':>11}")
    for name, studies in results.items():
        answer = [[1 - t.truth(s.winners[i]) / max(t.truth(k) for k in t.runs) <= WITHIN for s in studies]
                  for i, t in enumerate(tables)]
        found = [[max(t.truth(k) for k in s.measured[i]) >= max(t.truth(k) for k in t.runs) * (1 - WITHIN)
                  for s in studies] for i, t in enumerate(tables)]
        every = statistics.mean(all(a[j] for a in answer) for j in range(len(studies)))
        print(f"{name:<10} {statistics.mean(s.restarts for s in studies):>13.1f} {max(s.restarts for s in studies):>5d} "
              f"{statistics.mean(s.replays for s in studies):>8.1f} "
              + " ".join(f"{statistics.mean(a):>21.0%} | {statistics.mean(f):>8.0%}" for a, f in zip(answer, found))
              + f" {every:>11.0%}")
    print("(answer: the product's winner at that load, by choose(), within 2 % of that load's grid best; measured: "
          "the study measured such a config at that load; every load: the answer within 2 % at all of them)")
    if args.verbose:
        for i, t in enumerate(tables):
            print(f"{t.load} answers: " + ", ".join(f"{t.labels[k]} {n}" for k, n in
                                                    Counter(s.winners[i] for s in results["guided"]).most_common()))
        paths = Counter(" > ".join(tables[0].labels[k] for k in s.measured[0]) for s in results["guided"])
        for path, n in paths.most_common(8):
            print(f"  {n:>4} x {path}")


# With --loads: how much dearer a step's speculation gets with the batch (one replay per level).
LOAD_COST = {"concurrency 1": 0.5, "concurrency 4": 1.0, "concurrency 16": 2.0}


def synthetic_world(rng: random.Random, noise: float = 0.01,
                    load_cost: dict[str, float] | None = None) -> list[Table]:
    """The table's space (ngram and two drafts, k = 1..10, 31 configs) in a made-up world, a
    table per load: per drafter, acceptance alpha^(i+1) at position i (alpha 0.4 to 0.92) and
    step time 1 + (a + c * k^b) * load cost (a 0 to 0.6, c 0.03 to 0.35, b 0.5 to 1.5); three
    replays each with ``noise`` relative spread."""
    space = SearchSpace(methods=("ngram", "draft_model"), ks=tuple(range(1, 11)),
                        drafts={"draft_model": ("draft-a", "draft-b")})
    load_cost = load_cost or {"concurrency 1": 1.0}
    shapes: dict[str, tuple[float, float, float, float]] = {}
    tables = [Table(space, load) for load in load_cost]
    for candidate in space.candidates():
        k = k_of(candidate.params)
        alpha, a, c, b = shapes.setdefault(drafter_of(candidate.params), (
            rng.uniform(0.4, 0.92), rng.uniform(0.0, 0.6), rng.uniform(0.03, 0.35), rng.uniform(0.5, 1.5)))
        profile = [alpha ** (i + 1) for i in range(k)] if k else None
        for table in tables:
            true = 500.0 * (1 + sum(profile or [])) / (1 + (a + c * k ** b) * load_cost[table.load] if k else 1)
            table.add(candidate, [true * (1 + rng.gauss(0, noise)) for _ in range(3)], profile)
    return tables


def synthetic_loads(args: argparse.Namespace) -> None:
    """Per load, how often the search measured a config within 2 % of that load's best: what
    the k-by-batch-size schedule can choose from."""
    rng = random.Random(args.seed)
    worlds = [synthetic_world(rng, load_cost=LOAD_COST) for _ in range(args.worlds)]
    print(f"{args.worlds} made-up worlds of 31 configs measured at {', '.join(LOAD_COST)} (speculation's "
          f"step cost x {', '.join(f'{c:g}' for c in LOAD_COST.values())}), 1 % noise, --repeats {args.repeats}, "
          f"seed {args.seed}")
    print(f"{'guided':<32} {'restarts mean':>13} {'max':>5} "
          + " ".join(f"{load + ' within 2%':>24}" for load in LOAD_COST) + f" {'every load':>11}")
    databases = Databases()
    try:
        studies = [run_study(tables, "guided", args.repeats, 31, args.seed * 100_003 + i, databases, args.noise,
                             args.smooth, args.max_repeats, args.precision)
                   for i, tables in enumerate(worlds)]
    finally:
        databases.close()
    hits = {load: 0 for load in LOAD_COST}
    every = 0
    for tables, study in zip(worlds, studies):
        found = {t.load: max(t.truth(key) for key in keys) >= max(t.truth(key) for key in t.runs) * (1 - WITHIN)
                 for t, keys in zip(tables, study.measured)}
        every += all(found.values())
        for load in LOAD_COST:
            hits[load] += found[load]
    restarts = [s.restarts for s in studies]
    print(f"{'each load and the mean':<32} {statistics.mean(restarts):>13.1f} {max(restarts):>5d} "
          + " ".join(f"{hits[load] / len(worlds):>24.0%}" for load in LOAD_COST)
          + f" {every / len(worlds):>11.0%}")


def synthetic(args: argparse.Namespace) -> None:
    """One study per strategy in each of ``--worlds`` made-up worlds."""
    quiet_optuna()
    if args.loads:
        return synthetic_loads(args)
    rng = random.Random(args.seed)
    worlds = [synthetic_world(rng)[0] for _ in range(args.worlds)]
    grid_size = len(worlds[0].runs)
    budget = grid_size // 4
    print(f"{args.worlds} made-up worlds of {grid_size} configs (ngram and two drafts, k = 1..10), "
          f"1 % noise, --repeats {args.repeats}, --noise {args.noise:g}, seed {args.seed}; random and TPE get "
          f"a quarter of the grid's restarts ({budget})")
    print(HEADER)
    databases = Databases()
    try:
        for name in ("guided", "grid", "random", "tpe"):
            studies = []
            for i, table in enumerate(worlds):
                restarts = grid_size if name in ("guided", "grid") else budget
                studies.append(run_study([table], name, args.repeats, restarts, args.seed * 100_003 + i, databases,
                                         args.noise, args.smooth, args.max_repeats, args.precision))
            # Each world has its own best: the figures per world, then their mean.
            per_world = [figures([s], t) for s, t in zip(studies, worlds)]
            f = Figures(statistics.mean(s.restarts for s in studies), max(s.restarts for s in studies),
                        statistics.mean(p.within for p in per_world), statistics.mean(p.loose for p in per_world),
                        statistics.mean(p.regret for p in per_world), statistics.mean(p.found for p in per_world),
                        statistics.median(s.run_noise for s in studies))
            print(row(name, f, grid_size))
    finally:
        databases.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="measure the grid on the real vLLM server and export it")
    m.add_argument("--db", default=f"sqlite:///{ROOT / 'benchmarks' / 'data' / 'grid.db'}")
    m.add_argument("--table", type=Path, default=TABLE)
    m.add_argument("--export-only", action="store_true", help="only export an already measured --db")
    m.add_argument("--trials", type=int, default=31, help="measure only the first N configs of the grid")
    m.add_argument("--replace-from", action="append", metavar="DB",
                   help="a database with some configs measured again (their runs replace --db's)")
    m.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)),
                   help="the one core the tuner and vLLM run on (default: the last); -1: leave it to the scheduler")
    s = sub.add_parser("simulate", help="run the strategies against the stored table")
    s.add_argument("--table", type=Path, default=TABLE)
    s.add_argument("--runs", type=int, default=RUNS)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--method", action="append", help="simulate on this method's configs only (repeatable)")
    s.add_argument("--max-k", type=int, help="simulate on the configs with k <= this only")
    s.add_argument("--verbose", action="store_true", help="also the guided search's answers and trial orders")
    ml = sub.add_parser("loads", help="one study at several loads on stored tables (--table per load)")
    ml.add_argument("--table", type=Path, action="append", required=True, help="a stored table, one per load")
    ml.add_argument("--runs", type=int, default=30)
    ml.add_argument("--seed", type=int, default=0)
    ml.add_argument("--method", action="append", help="simulate on this method's configs only (repeatable)")
    ml.add_argument("--max-k", type=int, help="simulate on the configs with k <= this only")
    ml.add_argument("--verbose", action="store_true", help="also the guided search's answers and trial orders")
    w = sub.add_parser("synthetic", help="run the strategies in made-up worlds, one study per world")
    w.add_argument("--worlds", type=int, default=WORLDS)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--loads", action="store_true",
                   help="a study at three loads: does it measure each load's best k (for the schedule)?")
    for p in (s, ml, w):
        p.add_argument("--repeats", type=int, default=1, help="replays per trial, as tuner optimize --repeats")
        p.add_argument("--noise", type=float, default=DEFAULT_NOISE, help="as tuner optimize --noise")
        p.add_argument("--max-repeats", type=int, help="as tuner optimize --max-repeats")
        p.add_argument("--precision", type=float, default=0.02, help="as tuner optimize --precision")
        p.add_argument("--smooth", action="store_true",
                       help="jitter each drawn replay by the stored spread (a smoothed bootstrap; see draw_replay)")
    args = parser.parse_args()
    if args.command == "measure" and args.cpu == -1:
        args.cpu = None
    {"measure": measure, "simulate": simulate, "loads": simulate_loads, "synthetic": synthetic}[args.command](args)


if __name__ == "__main__":
    main()
