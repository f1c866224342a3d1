"""The commands on traffic: `tuner capture` records it, `tuner workload` imports, inspects,
samples and splits workload files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.cli.app import app, user_errors, workload_app
from tuner.cli.options import POSITIVE, FormatOpt, JsonOpt
from tuner.outputs import Output, chosen_format, console, err_console
from tuner.workload import load_workload


@app.command()
def capture(
    upstream: Annotated[str, typer.Option(help="The OpenAI-compatible server to forward to, e.g. http://127.0.0.1:8000.")],
    out: Annotated[Path, typer.Option(help="Workload JSONL to write (started afresh).")],
    listen: Annotated[str, typer.Option(help="HOST:PORT the proxy listens on; point clients here.")] = "127.0.0.1:8100",
    sample: Annotated[float, typer.Option(help="Fraction of requests recorded (all are proxied).")] = 1.0,
    max_requests: Annotated[Optional[int], typer.Option(help="Stop after recording this many requests.")] = None,
    duration: Annotated[Optional[float], typer.Option(parser=POSITIVE, help="Stop after this many seconds.")] = None,
    redact: Annotated[Optional[list[str]], typer.Option(
        help="Regex whose matches in prompts are written as \\[redacted], repeatable.")] = None,
    workload_type: Annotated[Optional[str], typer.Option("--type", help="Workload type written on every line.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the --sample draw.")] = 0,
) -> None:
    """Record live traffic: a reverse proxy that writes one workload line per request."""
    from tuner.workload.capture import (CaptureSettings, CaptureSummary, compile_redactions,
                                        parse_listen, run_capture)

    with user_errors():
        host, port = parse_listen(listen)
        settings = CaptureSettings(upstream=upstream, out=out, host=host, port=port, sample=sample,
                                   max_requests=max_requests, duration_s=duration,
                                   redact=compile_redactions(list(redact or [])),
                                   workload_type=workload_type, seed=seed)
        with err_console.status("starting the proxy") as status:
            def ready() -> None:
                status.update(f"proxying http://{host}:{port} -> {upstream}; recording to {out} "
                              f"(Ctrl-C to stop)")

            def recorded(summary: CaptureSummary) -> None:
                status.update(f"proxying http://{host}:{port} -> {upstream}; "
                              f"{summary.recorded} requests recorded to {out}")

            summary = run_capture(settings, on_ready=ready, on_record=recorded)
        skipped = ", ".join(f"{n} {reason}" for reason, n in summary.skipped.items()) or "none"
        err_console.print(f"stopped ({summary.stopped_by}): {summary.recorded} requests recorded to {out}, "
                          f"{summary.proxied} proxied; not recorded: {skipped}", highlight=False, soft_wrap=True)


@workload_app.command("import")
def workload_import(
    source: Annotated[Path, typer.Argument(help="The file to import (read only; nothing is downloaded).")],
    out: Annotated[Path, typer.Option(help="Workload JSONL to write; a folder when spec-bench splits by type.")],
    from_format: Annotated[str, typer.Option("--from", help="sharegpt, spec-bench, vllm-custom or openai-batch.")],
    workload_type: Annotated[Optional[str], typer.Option("--type", help="Workload type for every line.")] = None,
    tokenizer: Annotated[Optional[str], typer.Option(
        help="Local tokenizer folder: ShareGPT output lengths in tokens instead of characters / 4.")] = None,
) -> None:
    """Convert ShareGPT, Spec-Bench, vLLM custom or OpenAI batch files into workload JSONL."""
    from tuner.workload.importers import import_workload, write_imported

    with user_errors():
        groups = import_workload(from_format, source, workload_type, tokenizer,
                                 report=lambda note: err_console.print(note, highlight=False))
        for path, count in write_imported(groups, out).items():
            console.print(f"{path}: {count} requests", highlight=False)


# The default lives in tuner.workload.classify (DEFAULT_MIN_CONFIDENCE); typer needs a literal.
MinConfidenceOpt = Annotated[float, typer.Option(
    help="Below this probability of its best type, an unlabelled request goes to 'mixed' "
         "instead of a guess (0 turns that off; a line's own type always wins).")]


@workload_app.command("stats")
def workload_stats_command(
    path: Annotated[Path, typer.Argument(help="Workload JSONL.")],
    tokenizer: Annotated[Optional[str], typer.Option(
        help="Local tokenizer folder: prompt lengths in tokens instead of characters.")] = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    min_confidence: MinConfidenceOpt = 0.4,
) -> None:
    """Request count, guessed types, prompt and output lengths, arrival rate, chat vs completion."""
    from tuner.outputs.workload import stats_table
    from tuner.workload.stats import stats_dict, workload_stats

    with user_errors():
        out = Output(chosen_format(fmt, as_json))
        stats = workload_stats(load_workload(path), tokenizer, min_confidence)
        out.result(lambda: stats_dict(stats), lambda: [stats_table(stats)])


@workload_app.command("sample")
def workload_sample(
    path: Annotated[Path, typer.Argument(help="Workload JSONL.")],
    n: Annotated[int, typer.Option("--n", help="Requests in the sample.")],
    out: Annotated[Path, typer.Option(help="Where the sample is written.")],
    seed: Annotated[int, typer.Option(min=0, help="Same seed, same sample.")] = 0,
) -> None:
    """A smaller replay set with the file's length distribution and arrival pattern."""
    from tuner.workload import write_workload
    from tuner.workload.sample import sample_workload
    from tuner.workload.stats import left_out

    with user_errors():
        loaded = load_workload(path)
        sample = sample_workload(loaded, n, seed)
        count = write_workload(out, sample)
        console.print(f"{out}: {count} of {len(loaded)} requests", highlight=False)
        if warning := left_out(loaded.requests, sample, "the sample's requests",
                               "take a larger --n or another --seed"):
            err_console.print(warning, highlight=False, soft_wrap=True)


@workload_app.command("split")
def workload_split(
    path: Annotated[Path, typer.Argument(help="Workload JSONL with mixed traffic.")],
    out: Annotated[Path, typer.Option(file_okay=False, help="Folder for one TYPE.jsonl per workload type.")],
    min_confidence: MinConfidenceOpt = 0.4,
) -> None:
    """Split traffic into code, chat, summarization, math, translation, rag, other and mixed."""
    from tuner.workload import write_workload
    from tuner.workload.classify import MIXED, check_min_confidence, split_workload

    with user_errors():
        check_min_confidence(min_confidence)
        groups = split_workload(load_workload(path), min_confidence)
        for workload_type, requests in groups.items():
            target = out / f"{workload_type}.jsonl"
            console.print(f"{target}: {write_workload(target, requests)} requests", highlight=False)
        unsure = len(groups.get(MIXED, ()))
        console.print(f"{unsure} of {sum(map(len, groups.values()))} requests went to {MIXED} "
                      f"(best type below confidence {min_confidence:g}); label them with a "
                      f"\"type\" field or the X-Workload-Type header", highlight=False)

