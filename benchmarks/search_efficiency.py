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
  simulate  replays the grid, random search, plain TPE and the guided search against that stored
            table many times. Each simulated trial draws the config's replays with replacement
            (as many as were measured) and reports their median, so every strategy sees the
            measured noise. A strategy's choice is its measured config with the highest median;
            its regret is how far that config's true figure (the median of all its stored
            replays) falls below the grid's best.

  synthetic does the same on made-up worlds the table does not show, one study per world, as a
            check that the guided search is not fitted to the one table: each drafter's
            acceptance falls geometrically with position and its step time grows as
            a + c * k^b, from flattening (b = 0.5) to steepening (b = 1.5).

The guided search here is the same ``GuidedSearch.propose`` that ``tuner optimize`` calls.

  python benchmarks/search_efficiency.py measure
  python benchmarks/search_efficiency.py simulate --runs 200
  python benchmarks/search_efficiency.py synthetic --worlds 200
  python benchmarks/search_efficiency.py synthetic --worlds 200 --loads

The machine must be otherwise idle while it measures: on 2 cores a test run beside it moves a
replay's tokens/s by up to 20 %. Configs measured while something else ran can be measured
again and swapped in (the table lists them under "measured_again"):

  python benchmarks/search_efficiency.py measure --db sqlite:///benchmarks/data/grid-again.db --trials 14
  python benchmarks/search_efficiency.py measure --export-only --replace-from sqlite:///benchmarks/data/grid-again.db
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import optuna

from tuner.search.guided import (DEFAULT_RUN_NOISE, DEFAULT_Z, GuidedSearch, drafter_of, k_of, key_of,
                                 observation, run_noise)
from tuner.search.space import SearchSpace, parse_lookup
from tuner.search.study import OptimizeSettings, make_sampler
from tuner.stats import geometric_mean, mad

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "benchmarks" / "data" / "search_grid.json"
MODELS = ROOT / ".models"
WITHIN = 0.02  # "reaches the grid's answer": within 2 % of its best
LOOSE = 0.05  # also printed: within 5 %, for tables whose noise is larger than 2 %


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


@dataclass
class Table:
    space: SearchSpace
    runs: dict[str, list[float]]  # config key -> tokens/s per replay
    profile: dict[str, list[float] | None]
    labels: dict[str, str]

    @classmethod
    def load(cls, path: Path, methods: list[str] | None = None, max_k: int | None = None) -> Table:
        """``methods``, ``max_k``: simulate on that part of the measured space only."""
        record = json.loads(path.read_text())
        s = record["space"]
        kept = tuple(m for m in s["methods"] if not methods or m in methods)
        if not kept:
            raise SystemExit(f"none of --method {', '.join(methods or [])} is in the table ({', '.join(s['methods'])})")
        space = SearchSpace(methods=kept, ks=tuple(k for k in s["ks"] if max_k is None or k <= max_k),
                            drafts={m: tuple(d) for m, d in s["drafts"].items() if m in kept},
                            ngram_lookup=tuple(parse_lookup(x) for x in s["ngram_lookup"]))
        by_config = {json.dumps(c["config"], sort_keys=True): c for c in record["configs"]}
        runs, profile, labels = {}, {}, {}
        for candidate in space.candidates():
            found = by_config[json.dumps(candidate.spec.to_vllm() if candidate.spec else None, sort_keys=True)]
            key = key_of(candidate.params)
            runs[key], profile[key], labels[key] = found["runs"], found["per_position"], found["label"]
        return cls(space, runs, profile, labels)

    def truth(self, key: str) -> float:
        return statistics.median(self.runs[key])

    def draw(self, key: str, rng: random.Random) -> tuple[float, float]:
        """One simulated trial: (median of the config's replays drawn with replacement, MAD of
        its stored replays). The spread is the measured one: a resample of 3 repeats repeats a
        value 78 % of the time, which gives a MAD of 0 that no real trial shows, and the
        guided search would then take the noise for nil."""
        runs = self.runs[key]
        sample = [rng.choice(runs) for _ in runs]
        return statistics.median(sample), mad(runs)


def run_grid(table: Table, rng: random.Random, budget: int) -> dict[str, float]:
    return {key: table.draw(key, rng)[0] for key in table.runs}


def run_random(table: Table, rng: random.Random, budget: int) -> dict[str, float]:
    keys = list(table.runs)
    chosen = [keys[0]] + rng.sample(keys[1:], budget - 1)  # the baseline is always measured
    return {key: table.draw(key, rng)[0] for key in chosen}


def run_tpe(table: Table, rng: random.Random, budget: int) -> dict[str, float]:
    sampler = make_sampler(OptimizeSettings(seed=rng.randrange(2**31), strategy="tpe"))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(table.space.candidates()[0].params)
    measured: dict[str, float] = {}
    asked = 0
    while len(measured) < budget and asked < 50 * budget:
        trial = study.ask()
        asked += 1
        key = key_of(table.space.suggest(trial).params)
        if key in measured:  # as the real loop: a config is never measured twice
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        median, spread = table.draw(key, rng)
        measured[key] = median
        study.tell(trial, median - spread)
    return measured


def run_guided_loads(tables: dict[str, Table], rng: random.Random, per_load: bool, budget: int | None = None,
                     z: float = DEFAULT_Z) -> dict[str, dict[str, float]]:
    """The guided search as the study runs it, on one table per load (one trial replays every
    level): the observation's tokens/s is the geometric mean over the loads, and each load's own
    figure goes with it (``per_load``; without, the search sees the mean only). Stops at
    ``budget`` restarts. Returns load -> config key -> measured tokens/s."""
    first = next(iter(tables.values()))
    candidates = first.space.candidates()
    by_key = {key_of(c.params): c for c in candidates}
    search = GuidedSearch(candidates, DEFAULT_RUN_NOISE, z)
    measured, values, spreads = {}, {load: {} for load in tables}, []
    while (budget is None or len(measured) < budget) and (proposal := search.propose(measured)) is not None:
        key = key_of(proposal.candidate.params)
        drawn = {load: table.draw(key, rng) for load, table in tables.items()}
        for load, (median, spread) in drawn.items():
            values[load][key] = median
            spreads.append(spread / median)
        search.noise = run_noise(spreads)  # as in the study
        at_load = {load: median for load, (median, _) in drawn.items()}
        measured[key] = observation(by_key[key].params, geometric_mean(list(at_load.values())), first.profile[key],
                                    by_load=at_load if per_load else None)
    return values


def run_guided(table: Table, rng: random.Random, budget: int, z: float = DEFAULT_Z) -> dict[str, float]:
    return run_guided_loads({"": table}, rng, False, budget, z)[""]


STRATEGIES = {"grid": run_grid, "random": run_random, "tpe": run_tpe, "guided": run_guided}


def simulate(args: argparse.Namespace) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    table = Table.load(args.table, args.method, args.max_k)
    record = json.loads(args.table.read_text())
    grid_size = len(table.runs)
    truth = {key: table.truth(key) for key in table.runs}
    best_key = max(truth, key=truth.get)
    best = truth[best_key]
    near = [table.labels[k] for k in truth if truth[k] >= best * (1 - WITHIN)]
    part = "" if not (args.method or args.max_k) else (
        f" restricted to {', '.join(table.space.methods)}, k <= {max(table.space.ks)}")
    print(f"table: {args.table}{part} ({grid_size} configs, {record['load']}, measured on "
          f"{record['host']} with {record['cpus']} CPUs, vLLM {record['vllm_version']})")
    print(f"grid's best: {table.labels[best_key]} at {best:.1f} tok/s (median of its replays); "
          f"within {WITHIN:.0%} of it: {', '.join(near)}")
    spread = statistics.median(mad(r) / statistics.median(r) for r in table.runs.values())
    print(f"run-to-run noise in the table: median relative MAD {spread:.1%}")

    def evaluate(name: str, budget: int) -> tuple[float, float, float, float]:
        rng = random.Random(args.seed)
        restarts, hits, loose, regrets = [], 0, 0, []
        for _ in range(args.runs):
            values = STRATEGIES[name](table, rng, budget)
            chosen = max(values, key=values.get)
            regret = 1 - truth[chosen] / best
            restarts.append(len(values))
            hits += regret <= WITHIN
            loose += regret <= LOOSE
            regrets.append(regret)
        return (statistics.mean(restarts), max(restarts), hits / args.runs, loose / args.runs,
                statistics.mean(regrets))

    results = {"guided": evaluate("guided", grid_size)}
    guided_budget = round(results["guided"][1])  # random and TPE get as many restarts as guided's worst
    quarter = grid_size // 4
    results["grid"] = evaluate("grid", grid_size)
    for name in ("random", "tpe"):
        results[f"{name} (budget {guided_budget})"] = evaluate(name, guided_budget)
        if quarter != guided_budget:
            results[f"{name} (budget {quarter})"] = evaluate(name, quarter)
    print(f"\n{args.runs} simulated studies per strategy, seed {args.seed}")
    print(f"{'strategy':<22} {'restarts mean':>13} {'max':>5} {'of grid':>8} {'within 2%':>10} "
          f"{'within 5%':>10} {'mean regret':>12}")
    for name, (mean_restarts, max_restarts, hit_rate, loose_rate, regret) in results.items():
        print(f"{name:<22} {mean_restarts:>13.1f} {max_restarts:>5d} {mean_restarts / grid_size:>8.0%} "
              f"{hit_rate:>10.0%} {loose_rate:>10.0%} {regret:>12.2%}")
    g = results["guided"]
    met = g[2] >= 0.9 and g[0] <= grid_size / 4
    print(f"\ntarget (within 2% in >= 90% of runs, <= a quarter of the grid's {grid_size} restarts): "
          f"{'met' if met else 'NOT met'} (guided: {g[2]:.0%} of runs, {g[0]:.1f} restarts)")


# With --loads: how much dearer a step's speculation gets with the batch (one replay per level).
LOAD_COST = {"concurrency 1": 0.5, "concurrency 4": 1.0, "concurrency 16": 2.0}


def synthetic_world(rng: random.Random, noise: float = 0.01,
                    load_cost: dict[str, float] | None = None) -> dict[str, Table]:
    """The table's space (ngram and two drafts, k = 1..10, 31 configs) in a made-up world, a
    table per load: per drafter, acceptance alpha^(i+1) at position i (alpha 0.4 to 0.92) and
    step time 1 + (a + c * k^b) * load cost (a 0 to 0.6, c 0.03 to 0.35, b 0.5 to 1.5); three
    replays each with ``noise`` relative spread."""
    space = SearchSpace(methods=("ngram", "draft_model"), ks=tuple(range(1, 11)),
                        drafts={"draft_model": ("draft-a", "draft-b")})
    load_cost = load_cost or {"": 1.0}
    shapes: dict[str, tuple[float, float, float, float]] = {}
    tables = {load: Table(space, {}, {}, {}) for load in load_cost}
    for candidate in space.candidates():
        key, k = key_of(candidate.params), k_of(candidate.params)
        alpha, a, c, b = shapes.setdefault(drafter_of(candidate.params), (
            rng.uniform(0.4, 0.92), rng.uniform(0.0, 0.6), rng.uniform(0.03, 0.35), rng.uniform(0.5, 1.5)))
        profile = [alpha ** (i + 1) for i in range(k)] if k else None
        for load, table in tables.items():
            table.profile[key] = profile
            true = 500.0 * (1 + sum(profile or [])) / (1 + (a + c * k ** b) * load_cost[load] if k else 1)
            table.runs[key] = [true * (1 + rng.gauss(0, noise)) for _ in range(3)]
            table.labels[key] = candidate.label
    return tables


def synthetic_loads(args: argparse.Namespace) -> None:
    """Per load, how often the search measured a config within 2 % of that load's best: what
    the k-by-batch-size schedule can choose from."""
    rng = random.Random(args.seed)
    worlds = [synthetic_world(rng, load_cost=LOAD_COST) for _ in range(args.worlds)]
    print(f"{args.worlds} made-up worlds of 31 configs measured at {', '.join(LOAD_COST)} (speculation's "
          f"step cost x {', '.join(f'{c:g}' for c in LOAD_COST.values())}), 1 % noise, seed {args.seed}")
    print(f"{'guided, the model of':<32} {'restarts mean':>13} {'max':>5} "
          + " ".join(f"{load + ' within 2%':>24}" for load in LOAD_COST) + f" {'every load':>11}")
    for per_load in (False, True):
        restarts, hits = [], {load: 0 for load in LOAD_COST}
        every = 0
        for tables in worlds:
            values = run_guided_loads(tables, rng, per_load)
            restarts.append(len(values[next(iter(LOAD_COST))]))
            found = {load: max(tables[load].truth(key) for key in values[load])
                     >= max(tables[load].truth(key) for key in tables[load].runs) * (1 - WITHIN) for load in LOAD_COST}
            every += all(found.values())
            for load in LOAD_COST:
                hits[load] += found[load]
        name = "each load and the mean" if per_load else "the geometric mean only"
        print(f"{name:<32} {statistics.mean(restarts):>13.1f} {max(restarts):>5d} "
              + " ".join(f"{hits[load] / len(worlds):>24.0%}" for load in LOAD_COST)
              + f" {every / len(worlds):>11.0%}")


def synthetic(args: argparse.Namespace) -> None:
    """One study per strategy in each of ``--worlds`` made-up worlds."""
    if args.loads:
        return synthetic_loads(args)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(args.seed)
    worlds = [synthetic_world(rng)[""] for _ in range(args.worlds)]
    grid_size = len(worlds[0].runs)
    budget = grid_size // 4
    print(f"{args.worlds} made-up worlds of {grid_size} configs (ngram and two drafts, k = 1..10), "
          f"1 % noise, seed {args.seed}; random and TPE get a quarter of the grid's restarts ({budget})")
    print(f"{'strategy':<22} {'restarts mean':>13} {'max':>5} {'of grid':>8} {'within 2%':>10} "
          f"{'within 5%':>10} {'mean regret':>12}")
    for name in ("guided", "grid", "random", "tpe"):
        restarts, regrets = [], []
        for table in worlds:
            values = STRATEGIES[name](table, rng, grid_size if name in ("guided", "grid") else budget)
            truth = {key: table.truth(key) for key in table.runs}
            restarts.append(len(values))
            regrets.append(1 - truth[max(values, key=values.get)] / max(truth.values()))
        print(f"{name:<22} {statistics.mean(restarts):>13.1f} {max(restarts):>5d} "
              f"{statistics.mean(restarts) / grid_size:>8.0%} {sum(r <= WITHIN for r in regrets) / len(worlds):>10.0%} "
              f"{sum(r <= LOOSE for r in regrets) / len(worlds):>10.0%} {statistics.mean(regrets):>12.2%}")


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
    s.add_argument("--runs", type=int, default=200)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--method", action="append", help="simulate on this method's configs only (repeatable)")
    s.add_argument("--max-k", type=int, help="simulate on the configs with k <= this only")
    w = sub.add_parser("synthetic", help="run the strategies in made-up worlds, one study per world")
    w.add_argument("--worlds", type=int, default=200)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--loads", action="store_true",
                   help="a study at three loads: does it measure each load's best k (for the schedule)?")
    args = parser.parse_args()
    if args.command == "measure" and args.cpu == -1:
        args.cpu = None
    {"measure": measure, "simulate": simulate, "synthetic": synthetic}[args.command](args)


if __name__ == "__main__":
    main()
