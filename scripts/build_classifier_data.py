"""Build the workload-type classifier's labelled prompts from public sources and templates.

    python scripts/build_classifier_data.py

Reads benchmarks/data/spec_bench_questions.jsonl and benchmarks/data/classifier/sources/
(docs/lab/classifier.md lists every source with its licence) and writes two files beside them:
``train.jsonl`` (what scripts/train_classifier.py fits on) and ``heldout.jsonl`` (never fitted
on; benchmarks/classifier_accuracy.py reports on it). Each line holds ``type``, ``source``,
``template`` and either ``prompt`` or ``messages``.

The split is by source and by template, not by random rows: a held-out prompt has a phrasing
that no training prompt has (the ``HELDOUT`` template lists), and where a type has more than
one source of material, whole sources (or disjoint slices of one) go to one side only. So the
held-out figure says how the classifier does on requests worded in a way it never saw.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "classifier"
SOURCES = DATA / "sources"
SPEC_BENCH = ROOT / "benchmarks" / "data" / "spec_bench_questions.jsonl"
SEED = 0

Row = dict

# ------------------------------------------------------------------ templates
# {text}: material (article, passages, transcript); {q}: a question; {s}: a sentence to
# translate, {src}/{tgt}: languages; {code}: code. A tuple is (system prompt, user message).

# LangChain 0.3.27 (MIT): langchain/chains/question_answering/stuff_prompt.py (prompt and chat
# system template), retrieval_qa/prompt.py; LlamaIndex core 0.14.25 (MIT):
# llama_index/core/prompts/default_prompts.py (DEFAULT_TEXT_QA_PROMPT_TMPL,
# DEFAULT_TREE_SUMMARIZE_TMPL) and chat_prompts.py (TEXT_QA_SYSTEM_PROMPT); LangChain hub
# "rlm/rag-prompt" as printed in LangChain's RAG tutorial.
LLAMA_QA_SYSTEM = (
    "You are an expert Q&A system that is trusted around the world.\n"
    "Always answer the query using the provided context information, and not prior knowledge.\n"
    "Some rules to follow:\n"
    "1. Never directly reference the given context in your answer.\n"
    "2. Avoid statements like 'Based on the context, ...' or 'The context information ...' or "
    "anything along those lines.")
RAG_TRAIN: dict[str, str | tuple[str, str]] = {
    "langchain-stuff": "Use the following pieces of context to answer the question at the end. "
                       "If you don't know the answer, just say that you don't know, don't try to "
                       "make up an answer.\n\n{text}\n\nQuestion: {q}\nHelpful Answer:",
    "langchain-stuff-chat": ("Use the following pieces of context to answer the user's question.\n"
                             "If you don't know the answer, just say that you don't know, don't "
                             "try to make up an answer.\n----------------\n{text}", "{q}"),
    "llamaindex-text-qa": "Context information is below.\n---------------------\n{text}\n"
                          "---------------------\nGiven the context information and not prior "
                          "knowledge, answer the query.\nQuery: {q}\nAnswer: ",
    "llamaindex-chat-text-qa": (LLAMA_QA_SYSTEM,
                                "Context information is below.\n---------------------\n{text}\n"
                                "---------------------\nGiven the context information and not "
                                "prior knowledge, answer the query.\nQuery: {q}\nAnswer: "),
    "llamaindex-tree-summarize": "Context information from multiple sources is below.\n"
                                 "---------------------\n{text}\n---------------------\nGiven the "
                                 "information from multiple sources and not prior knowledge, "
                                 "answer the query.\nQuery: {q}\nAnswer: ",
    "langchain-hub-rag-prompt": "You are an assistant for question-answering tasks. Use the "
                                "following pieces of retrieved context to answer the question. If "
                                "you don't know the answer, just say that you don't know. Use "
                                "three sentences maximum and keep the answer concise.\nQuestion: "
                                "{q} \nContext: {text} \nAnswer:",
    "numbered-sources": "Sources:\n{numbered}\n\nAnswer the question using the sources above and "
                        "cite them like [1].\nQuestion: {q}",
    "context-colon": "Context:\n{text}\n\nQuestion: {q}\nAnswer:",
    "raw-then-question": "{text}\n{q}",
    "search-results-chat": ("You are a helpful assistant. Answer only from the search results the "
                            "user gives you; say so when they do not contain the answer.",
                            "Search results:\n{text}\n\n{q}"),
    "docs-xml": "<documents>\n{xml}\n</documents>\n\nUsing the documents, answer: {q}",
    "read-and-answer": "Read the passages below and answer the question that follows.\n\n{text}"
                       "\n\nQ: {q}\nA:",
    "based-on-above": "{text}\n\nBased on the text above, {q_lower}",
    "text-question": "{text}\n\nQuestion: {q}",
    "numbered-then-question": "{numbered}\n\n{q}",
    "found-articles": "I found these articles:\n{text}\n\nCan you tell me: {q_lower}",
    "given-documents": "Given these documents, answer the question.\nDocuments:\n{numbered}\n"
                       "Question: {q}\nAnswer:",
    "background": "Here is some background:\n{text}\n\nMy question: {q}",
    "context-system": ("Use the context below to answer the user.\n\nContext:\n{text}", "{q}"),
}
RAG_HELDOUT: dict[str, str | tuple[str, str]] = {
    # Haystack 2 (Apache-2.0) docs' prompt for its PromptBuilder, with the Jinja loop unrolled.
    "haystack-prompt-builder": "Given the following information, answer the question.\n\n"
                               "Context:\n{text}\n\nQuestion: {q}\nAnswer:",
    "according-to": "{text}\n\nAccording to the passages above, {q_lower}",
    "knowledge-headings": "### Retrieved knowledge\n{text}\n\n### User question\n{q}",
    "cite-system": ("Answer using only the provided sources. Cite them as [n]. If the sources do "
                    "not say, reply that you cannot tell.", "{numbered}\n\nQuestion: {q}"),
    "here-are-snippets": "Here are some snippets from our knowledge base:\n\n{text}\n\nWith the "
                         "help of these snippets, {q_lower}",
}

SUM_TRAIN: dict[str, str | tuple[str, str]] = {
    # LangChain 0.3.27 (MIT) langchain/chains/summarize/stuff_prompt.py
    "langchain-summarize": 'Write a concise summary of the following:\n\n\n"{text}"\n\n\n'
                           "CONCISE SUMMARY:",
    # LlamaIndex core 0.14.25 (MIT) DEFAULT_SUMMARY_PROMPT_TMPL
    "llamaindex-summary": "Write a summary of the following. Try to use only the information "
                          "provided. Try to include as many key details as possible.\n\n\n{text}"
                          '\n\n\nSUMMARY:"""\n',
    # FLAN (Apache-2.0) flan/templates.py, cnn_dailymail and xsum patterns
    "flan-highlights": "Write highlights for this article:\n\n{text}\n\nHighlights:",
    "flan-highlight-points": "{text}\n\nWhat are highlight points for this article?",
    "flan-article-highlights": "Article: {text}\n\nHighlights:",
    "flan-summarize-article": "Summarize this article:\n\n{text}\n\nSummary:",
    "flan-about": "{text}\n\nWhat was this article about?",
    "flan-short-summary": "{text}\nWhat is a short summary of the above article?",
    "summarize-colon": "Summarize: {text}",
    "tldr": "{text}\n\nTL;DR:",
    "bullets": "Condense this into a few bullet points:\n\n{text}",
    "boil-down": "{text}\n\nCan you boil this down to the key points?",
    "two-sentences": "{text}\n\nSum this up in two sentences.",
    "short-version": "Give me the short version of this:\n{text}",
    "main-takeaway": "{text}\n\nWhat's the main takeaway here?",
    "gist": "{text}\n\nGive me the gist.",
    "exec-system": ("You summarize documents for busy executives. Keep it under 120 words.",
                    "{text}"),
    "recap": "{text}\n\nRecap the above in one paragraph.",
    "abstract": "Please produce an abstract for the following text.\n\n{text}",
    "minutes": "Here is a transcript:\n{text}\n\nWrite the minutes of this meeting.",
    "what-happened": "{text}\n\nBriefly, what happened?",
    "news-about": "{text}\n\nWhat is this news story about?",
    "meeting-summary": "{text}\n\nSummarize this meeting.",
    "story-short": "{text}\n\nSum up this story in a few lines.",
}
SUM_HELDOUT: dict[str, str | tuple[str, str]] = {
    "nutshell": "{text}\n\nIn a nutshell, what does this say?",
    "essentials": "Read this and tell me the essentials in under 100 words:\n\n{text}",
    "skim": "{text}\n\nShorten this to a paragraph a busy reader can skim.",
    "overview": "Create a brief overview of the following document.\n\n{text}",
    "main-points": "{text}\n\nWhat are the main points?",
    "executive-summary": "Produce an executive summary:\n{text}",
    "one-line": "{text}\n\nOne-line summary:",
}
# QMSum (MIT) queries: the meeting's own specific queries are training phrasings; these are not.
MEETING_HELDOUT = ["Summarize the meeting in a few sentences.",
                   "What was decided in this meeting? Give a short summary.",
                   "Give me a recap of this call for people who missed it."]

TR_TRAIN: dict[str, str | tuple[str, str]] = {
    # FLAN (Apache-2.0) flan/templates.py, wmt patterns
    "flan-translate-from-to": 'Translate "{s}" from {src} to {tgt}.',
    "flan-translate-to": "Translate to {tgt}:\n\n{s}",
    "flan-then-translate": "{s}\n\nTranslate to {tgt}",
    "flan-how-said": 'How is "{s}" said in {tgt}?',
    "translate-sentence": "Translate the following sentence to {tgt}:\n{s}",
    "text-translation": "{src} text: {s}\n{tgt} translation:",
    "could-you": "{s}\n\nCould you please translate this to {tgt}?",
    "say-this": "Say this in {tgt}: {s}",
    "what-is-in": 'What is "{s}" in {tgt}?',
    "colon-pair": "{src}: {s}\n{tgt}:",
    "arrow": "{src} → {tgt}: {s}",
    "arrow-ascii": "{src} -> {tgt}\n{s}",
    "render": "Render this {src} passage in {tgt}:\n\n{s}",
    "need-this": "I need this in {tgt}, please:\n{s}",
    "version": "Give me the {tgt} version of this sentence: {s}",
    "convert": "Convert this {src} sentence into {tgt}: {s}",
    "in-please": "{s}\n\nIn {tgt}, please.",
    "how-do-you-say": 'How do you say "{s}" in {tgt}?',
    "put-into": "Please put the following {src} text into {tgt}:\n{s}",
    "whats-the": "What's the {tgt} for this? {s}",
    "how-express": "How would one express this in {tgt}?\n{s}",
    "translator-system": ("You are a professional {src}-to-{tgt} translator. Output only the "
                          "translation.", "{s}"),
    "translate-german-english": "Translate {src} to {tgt}: {s}",
    "please-into": "{s}\n\nPlease translate into {tgt}.",
    "help-translate": "Can you help me translate this into {tgt}? {s}",
    "lang-please": "{tgt} please: {s}",
    "needed": "Translation to {tgt} needed:\n{s}",
    "write-in": "Write this sentence in {tgt}: {s}",
}
TR_HELDOUT: dict[str, str | tuple[str, str]] = {
    "equivalent": "Please provide the {tgt} equivalent of: {s}",
    "what-would-that-be": "{s}\n\nWhat would that be in {tgt}?",
    "help-me-write": "Help me write this in {tgt}: {s}",
    "rewrite-in": "Rewrite the sentence below in {tgt}.\n\n{s}",
    "original-translation": "Original ({src}): {s}\nTranslation ({tgt}):",
    "express": 'Could you express the following in {tgt}?\n"{s}"',
    "colleague": "I'm writing to a {tgt}-speaking colleague. How should I phrase this in {tgt}: {s}",
    "turn-into": "Turn this into {tgt}:\n{s}",
    "everything-system": ("Translate everything the user writes into {tgt}.", "{s}"),
}
LANGS = ["French", "Spanish", "Italian", "Portuguese", "Russian", "Czech", "Chinese", "Japanese",
         "Korean", "Dutch", "Polish", "Turkish", "Arabic", "Hindi", "Ukrainian", "Swedish",
         "Finnish", "Greek", "Vietnamese", "Indonesian", "German"]

CODE_TRAIN: dict[str, str | tuple[str, str]] = {
    "complete-fence": "Complete the following Python function:\n```python\n{code}```",
    "implement-this": "{code}\n\nImplement this function.",
    "explain": "Explain what this code does:\n\n{code}",
    "find-bug": "Find the bug in this function, if there is one:\n{code}",
    "unit-tests": "Write pytest unit tests for this function:\n```python\n{code}\n```",
    "refactor": "Refactor this for readability and add type hints:\n{code}",
    "to-javascript": "Translate this Python function to JavaScript:\n{code}",
    "review-system": ("You are a senior software engineer doing code review.",
                      "Please review this:\n```\n{code}\n```"),
}
CODE_HELDOUT: dict[str, str | tuple[str, str]] = {
    "optimize": "Can you make this faster? It is too slow on big inputs.\n\n{code}",
    "docstring": "Add a docstring and comments to the function below.\n{code}",
    "port-go": "Port this to Go:\n```python\n{code}\n```",
}
TASK_TRAIN = ["Write a {lang} function that {desc}", "{desc_cap} Use {lang}.",
              "How do I write code that {desc}", "I need a {lang} script that {desc}"]
TASK_HELDOUT = ["Could you code up something in {lang} that {desc}", "Show me {lang} code which {desc}"]
# Classic exercises, written for this project (no outside text): "Implement ..." requests.
IMPLEMENT_TRAIN = ["a binary search tree with insert and delete", "an LRU cache", "a trie",
                   "a min-heap", "a linked list with a reverse method", "a rate limiter",
                   "a thread-safe counter", "merge sort", "Dijkstra's shortest path",
                   "a stack with a get_min operation", "a circular buffer",
                   "a REST endpoint that returns a user's orders", "quicksort"]
IMPLEMENT_HELDOUT = ["a hash map with open addressing", "a union-find structure",
                     "a bloom filter", "a priority queue backed by a binary heap"]
LANGS_CODE_TRAIN = ["Python", "Java", "C++", "JavaScript", "Go", "Rust", "TypeScript"]
LANGS_CODE_HELDOUT = ["C#", "Kotlin", "Ruby", "Swift"]

MATH_TRAIN = ["{q}", "Can you help me with this: {q}", "{q} Show your work.",
              "Solve step by step: {q}", "Question: {q}\nAnswer:", "{q}\nLet's think step by step.",
              ("You are a patient math tutor.", "{q}")]
MATH_HELDOUT = ["{q}\nPlease reason it out and give the final answer.", "Quick one: {q}",
                ("Answer with a number and a one-line explanation.", "{q}")]

# Chat prompts that carry material but ask for neither a summary nor an answer from it:
# written for this project, so that length and pasted text alone do not decide the type.
CHAT_MATERIAL_TRAIN = ["Rewrite the following text in a more formal tone:\n\n{text}",
                       "Proofread this and fix any grammar mistakes:\n{text}",
                       "Write a short poem inspired by this:\n{text}",
                       "{text}\n\nWhat do you think about this? Give me your honest opinion.",
                       "Turn this into a friendly email to my team:\n{text}",
                       "Continue this story for another paragraph:\n{text}",
                       "Make this paragraph more persuasive:\n{text}",
                       "Give me feedback on my writing:\n{text}",
                       "Rewrite this in the style of a fairy tale:\n{text}",
                       "Add a catchy opening line to this paragraph:\n{text}"]
CHAT_MATERIAL_HELDOUT = ["Change the tone of the following to be more casual:\n{text}",
                         "{text}\n\nWrite a reply to this as if you were the editor."]
CHAT_WRAP_TRAIN = ["{q}", "Hey! {q}", ("You are a helpful assistant.", "{q}")]
CHAT_WRAP_HELDOUT = ["{q}", ("You are a friendly assistant. Keep answers short.", "{q}")]


# ------------------------------------------------------------------ material

def spec_bench() -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for line in SPEC_BENCH.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows.setdefault(row["category"], []).append(row)
    return rows


def jsonl(name: str) -> list[dict]:
    return [json.loads(x) for x in (SOURCES / name).read_text(encoding="utf-8").splitlines() if x]


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentences(texts: list[str], low: int = 50, high: int = 240) -> list[str]:
    out = []
    for text in texts:
        out += [s.strip() for s in _SENTENCE.split(text) if low <= len(s.strip()) <= high]
    return out


def rag_parts(row: dict) -> tuple[list[str], str]:
    """Spec-Bench's rag rows are retrieved passages, one a line, then the question."""
    *passages, question = row["turns"][0].rstrip().split("\n")
    return [p for p in passages if p.strip()], question.strip()


def meeting_windows(turns: list[dict], size: int = 22, step: int = 11) -> list[str]:
    lines = [f"{t['speaker']}: {t['content']}" for t in turns]
    return ["\n".join(lines[i:i + size]) for i in range(0, max(1, len(lines) - size + 1), step)]


# ------------------------------------------------------------------ rendering

def render(template: str | tuple[str, str], **values: str) -> dict:
    if isinstance(template, tuple):
        system, user = template
        return {"messages": [{"role": "system", "content": system.format(**values)},
                             {"role": "user", "content": user.format(**values)}]}
    return {"messages": [{"role": "user", "content": template.format(**values)}]}


def placeholders(passages: list[str], question: str) -> dict[str, str]:
    return {"text": "\n\n".join(passages), "q": question,
            "q_lower": question[:1].lower() + question[1:],
            "numbered": "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)),
            "xml": "\n".join(f'<document index="{i}">{p}</document>'
                             for i, p in enumerate(passages, 1))}


def cycle(templates: dict, rng: random.Random) -> Iterator[tuple[str, str | tuple[str, str]]]:
    names = list(templates)
    while True:
        rng.shuffle(names)
        for name in names:
            yield name, templates[name]


def emit(rows: list[Row], kind: str, source: str, template: str, body: dict) -> None:
    rows.append({"type": kind, "source": source, "template": template, **body})


# ------------------------------------------------------------------ per type

def build_rag(sb: dict, rng: random.Random, train: list[Row], held: list[Row]) -> None:
    items = [rag_parts(r) for r in sb["rag"]]
    for split, chunk, templates, copies in ((train, items[:60], RAG_TRAIN, 7),
                                            (held, items[60:], RAG_HELDOUT, 4)):
        names = cycle(templates, rng)
        for passages, question in chunk:
            for _ in range(copies):
                name, template = next(names)
                keep = passages[:rng.randint(2, max(2, len(passages)))]
                emit(split, "rag", "spec-bench-rag", name,
                     render(template, **placeholders(keep, question)))


def build_summarization(sb: dict, rng: random.Random, train: list[Row], held: list[Row]) -> None:
    articles = [r["turns"][0].removeprefix("Summarize: ") for r in sb["summarization"]]
    wiki = [" ".join(rag_parts(r)[0][:3]) for r in sb["rag"]]
    meeting = json.loads((SOURCES / "qmsum_es2002a.json").read_text(encoding="utf-8"))
    windows = meeting_windows(meeting["turns"])
    names = cycle(SUM_TRAIN, rng)
    for article in articles[:60]:
        for _ in range(3):
            name, template = next(names)
            emit(train, "summarization", "cnn-dailymail", name, render(template, text=article))
    for passage in wiki[:40]:
        name, template = next(names)
        emit(train, "summarization", "nq-wikipedia", name, render(template, text=passage))
    for window in windows[:3]:
        for query in meeting["specific_queries"]:
            emit(train, "summarization", "qmsum", "qmsum-query",
                 render("{text}\n\n{q}", text=window, q=query))
        for _ in range(3):
            name, template = next(names)
            emit(train, "summarization", "qmsum", name, render(template, text=window))
    names = cycle(SUM_HELDOUT, rng)
    for article in articles[60:]:
        for _ in range(3):
            name, template = next(names)
            emit(held, "summarization", "cnn-dailymail", name, render(template, text=article))
    for passage in wiki[60:]:
        name, template = next(names)
        emit(held, "summarization", "nq-wikipedia", name, render(template, text=passage))
    for window in windows[3:]:
        for query in MEETING_HELDOUT:
            emit(held, "summarization", "qmsum", "meeting-heldout",
                 render("{text}\n\n{q}", text=window, q=query))


def build_translation(sb: dict, rng: random.Random, train: list[Row], held: list[Row]) -> None:
    german = [r["turns"][0].removeprefix("Translate German to English: ") for r in sb["translation"]]
    cnn = sentences([r["turns"][0].removeprefix("Summarize: ") for r in sb["summarization"][:60]])
    wiki = sentences([" ".join(rag_parts(r)[0]) for r in sb["rag"][60:]])
    rng.shuffle(cnn)
    rng.shuffle(wiki)
    for split, templates, pairs in (
            (train, TR_TRAIN, [(s, "German", "English", "wmt14-de") for s in german[:60]]
             + [(s, "English", None, "cnn-dailymail") for s in cnn[:420]]),
            (held, TR_HELDOUT, [(s, "German", "English", "wmt14-de") for s in german[60:]]
             + [(s, "English", None, "nq-wikipedia") for s in wiki[:120]])):
        names = cycle(templates, rng)
        for sentence, src, tgt, source in pairs:
            name, template = next(names)
            target = tgt or rng.choice(LANGS[:-1] if split is held else LANGS)
            emit(split, "translation", source, name, render(template, s=sentence, src=src, tgt=target))


def _docstring(prompt: str) -> str:
    match = re.search(r'"""(.*?)"""|\'\'\'(.*?)\'\'\'', prompt, re.S)
    return " ".join((match.group(1) or match.group(2)).split()) if match else ""


def _description(doc: str) -> str:
    text = re.split(r"\s(?:>>>|For example|Example|Examples|e\.g\.)", doc)[0].strip()
    return text.rstrip(".")


def leetcode(desc: str, examples: list[tuple[str, str]], rng: random.Random) -> str:
    """A problem statement in the LeetCode layout: description, examples, constraints."""
    parts = [desc.strip().rstrip(".") + "."]
    for i, (given, out) in enumerate(examples[:3], 1):
        parts.append(f"Example {i}:\n\nInput: {given}\nOutput: {out}")
    limit = rng.choice(["10^4", "10^5", "1000", "2 * 10^5"])
    parts.append(f"Constraints:\n\n1 <= n <= {limit}\n-10^9 <= values <= 10^9")
    return "\n\n".join(parts)


def build_code(sb: dict, rng: random.Random, train: list[Row], held: list[Row]) -> None:
    humaneval = jsonl("humaneval.jsonl")
    mbpp = jsonl("mbpp.jsonl")
    for row in humaneval:  # raw completion prompts, as a code-completion client sends them
        emit(train, "code", "humaneval", "completion", {"prompt": row["prompt"]})
    names = cycle(CODE_TRAIN, rng)
    for row in humaneval[:130]:
        name, template = next(names)
        emit(train, "code", "humaneval", name, render(template, code=row["prompt"] + row["solution"]))
    names = cycle(CODE_HELDOUT, rng)
    for row in humaneval[130:]:
        name, template = next(names)
        emit(held, "code", "humaneval", name, render(template, code=row["prompt"] + row["solution"]))
    for row in humaneval:
        doc = _docstring(row["prompt"])
        desc = _description(doc)
        if len(desc) < 20:
            continue
        examples = re.findall(r">>>\s*\w+\((.*?)\)\s*\n\s*(.+)", row["prompt"])
        if examples:
            emit(train, "code", "humaneval", "leetcode-layout",
                 render("{q}", q=leetcode(desc, examples, rng)))
        lang = rng.choice(LANGS_CODE_TRAIN)
        task = rng.choice(TASK_TRAIN)
        low = desc[:1].lower() + desc[1:]
        emit(train, "code", "humaneval", "task-train",
             render(task, lang=lang, desc=low, desc_cap=desc + "."))
    for row in mbpp:
        desc = row["text"].strip()
        call = re.match(r"assert\s+\w+\((.*)\)\s*==\s*(.+)$", row["test"])
        lang = rng.choice(LANGS_CODE_HELDOUT)
        emit(held, "code", "mbpp", "mbpp-plain", render("{q}", q=desc))
        emit(held, "code", "mbpp", "task-heldout",
             render(rng.choice(TASK_HELDOUT), lang=lang,
                    desc=re.sub(r"^Write a (?:python )?function to ", "", desc)))
        if call:
            emit(held, "code", "mbpp", "leetcode-layout-mbpp",
                 render("{q}", q=leetcode(re.sub(r"^Write a (?:python )?function to ", "Your task is to ",
                                                 desc), [call.groups()], rng)))
    for row in sb["coding"]:
        emit(train, "code", "mt-bench", "as-is", render("{q}", q=row["turns"][0]))
    for thing in IMPLEMENT_TRAIN:
        for lang in rng.sample(LANGS_CODE_TRAIN, 3):
            emit(train, "code", "exercises", "implement", render("Implement {t} in {l}.", t=thing, l=lang))
    for thing in IMPLEMENT_HELDOUT:
        for lang in rng.sample(LANGS_CODE_HELDOUT, 2):
            emit(held, "code", "exercises", "implement-heldout",
                 render("Write an implementation of {t} using {l}.", t=thing, l=lang))


def build_math(sb: dict, rng: random.Random, train: list[Row], held: list[Row]) -> None:
    generated = jsonl("mathematics_dataset.jsonl")
    modules = sorted({r["module"] for r in generated})
    rng.shuffle(modules)
    held_modules = {m for m in modules[:14] if m != "numbers__lcm"}
    train_names, held_names = cycle({str(i): t for i, t in enumerate(MATH_TRAIN)}, rng), \
        cycle({str(i): t for i, t in enumerate(MATH_HELDOUT)}, rng)
    for row in generated:
        split, names = (held, held_names) if row["module"] in held_modules else (train, train_names)
        name, template = next(names)
        emit(split, "math", f"mathematics_dataset/{row['module']}", f"math-{name}",
             render(template, q=row["question"]))
    for row in sb["math_reasoning"] + sb["math"]:
        name, template = next(train_names)
        emit(train, "math", "gsm8k-spec-bench" if row["category"] == "math_reasoning" else "mt-bench",
             f"math-{name}", render(template, q=row["turns"][0]))
    for row in jsonl("gsm8k.jsonl"):
        name, template = next(held_names)
        emit(held, "math", "gsm8k-test", f"math-heldout-{name}", render(template, q=row["question"]))


def build_chat(sb: dict, rng: random.Random, train: list[Row], held: list[Row]) -> None:
    mt = [r for c in ("writing", "roleplay", "reasoning", "extraction", "stem", "humanities")
          for r in sb[c]]
    rng.shuffle(mt)
    qa = sb["qa"]
    for split, rows, wraps in ((train, mt[:45] + qa[:60], CHAT_WRAP_TRAIN),
                               (held, mt[45:] + qa[60:], CHAT_WRAP_HELDOUT)):
        names = cycle({str(i): t for i, t in enumerate(wraps)}, rng)
        for row in rows:
            name, template = next(names)
            source = "nq-open" if row["category"] == "qa" else "mt-bench"
            emit(split, "chat", source, f"chat-{name}", render(template, q=row["turns"][0]))
    cnn = [r["turns"][0].removeprefix("Summarize: ") for r in sb["summarization"]]
    paragraphs = [" ".join(sentences([a])[:4]) for a in cnn]
    wiki = [rag_parts(r)[0][0] for r in sb["rag"]]
    for split, material, templates in ((train, paragraphs[:60] + wiki[:40], CHAT_MATERIAL_TRAIN),
                                       (held, paragraphs[60:] + wiki[60:], CHAT_MATERIAL_HELDOUT)):
        names = cycle({str(i): t for i, t in enumerate(templates)}, rng)
        for text in material:
            if len(text) < 80:
                continue
            name, template = next(names)
            emit(split, "chat", "cnn-or-wikipedia", f"chat-material-{name}", render(template, text=text))


BUILDERS: list[Callable[[dict, random.Random, list[Row], list[Row]], None]] = [
    build_rag, build_summarization, build_translation, build_code, build_math, build_chat]


def main() -> None:
    sb = spec_bench()
    train: list[Row] = []
    held: list[Row] = []
    for build in BUILDERS:
        build(sb, random.Random(f"{SEED}-{build.__name__}"), train, held)
    for name, rows in (("train.jsonl", train), ("heldout.jsonl", held)):
        with (DATA / name).open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["type"]] = counts.get(row["type"], 0) + 1
        print(f"{name}: {len(rows)} prompts  " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
