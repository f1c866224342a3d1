"""Sort requests into workload types with a small rule-based classifier.

The rules, in the order they apply, so a user can predict the result:

1. A line's own ``type`` field wins, whatever string it holds.
2. Otherwise two texts are read: the system prompt (all ``system`` messages) and the last
   user message (the ``prompt`` of a completions request; the last message when no message
   has the ``user`` role). Each type collects points from the cues below that the texts
   match. In a text longer than 1200 characters (an article, documents) the phrase cues are
   read only in its first and last 600 characters, where an instruction sits; code and LaTeX
   structure (marked "anywhere" below) counts wherever it is. A cue counts once per text: a strong cue scores 2, a weak cue 1, and a cue in
   the system prompt counts double (the system prompt states the job of every turn). A
   strong cue usually matches a weak one of its type too ("Summarize" is also a word
   starting with "summar"); both count.
3. A type needs at least 2 points: one strong cue, two different weak cues, or one weak
   cue in the system prompt. A single weak cue in a question ("Can you summarize the ideas
   of Stoicism?", "How many days ...?") stays a chat.
4. The type with the most points wins; ties go to the first of rag, summarization,
   translation, code, math.
5. No type reaches 2 points: ``chat`` for chat requests (``messages``), ``other`` for
   completions (``prompt``).

Measured on public labelled traffic it was not written against (a Spec-Bench slice, 218
requests): 93.1 % overall; see docs/classifier.md for the confusion table and its limits.

Cues (case-insensitive unless marked; "line start" allows leading spaces):

- shape cues, strong, read on the whole text: **documents then a question** (rag): the last
  line is a question (ends with "?" or opens with who/what/when/where/which/why/how/is/are/
  does/...), at most 300 characters, after at least 1000 characters of material;
  otherwise a **word problem** (math): a text under 1000 characters with at least two
  different numbers that asks for a quantity ("how many/much/long/far/old/fast/often",
  "what percent", "what is the total/cost/price/average/... ").

- rag, strong: ``context:`` / ``documents:`` / ``sources:`` at a line start; "based on the
  following/provided/given context/documents/passages/sources"; "answer only from/using";
  "using only the context/documents"; ``[doc`` blocks such as ``[doc 1]`` or
  ``[document 2]``. Weak: "retrieved", "passage", "the context", "the documents",
  "according to the".
- summarization, strong: a text that opens with "Summarize"/"Summarise"/"TL;DR";
  "summarize/summary of/summarise the following/this/these"; "tl;dr"; "in N sentences"
  or "in N bullet points". Weak: any word starting with "summar", "key points",
  "main points", "condense", "shorten", "recap", "abstract:".
- translation, strong: a text that opens with "Translate"; "into <language>"; "from
  <language> to/into". Weak: "translate", "translation", "translator", "to <language>".
  Languages: English, French, German, Spanish, Italian, Portuguese, Dutch, Russian,
  Chinese, Mandarin, Japanese, Korean, Arabic, Hindi, Turkish, Polish, Swedish, Greek.
- code, strong (anywhere): a code fence (three backticks); a line starting with ``def ``,
  ``class ``, ``import ``, ``from X import``, ``#include``, ``package ``, ``fn ``,
  ``func ``, ``public ``, ``private `` (case-sensitive); a Python block header line such
  as ``for x in y:`` or ``if x:`` (case-sensitive). Strong: "write/implement/develop/create/
  build/code a/an/the/me a ... function/program/script/query/class/method/regex/unit test/
  algorithm/website/web page/api/endpoint/command-line tool" (up to three words between).
  Weak: "function", "return ", ``SELECT `` (case-sensitive), "bug", "compile", "compiler",
  "stack trace", "traceback", "exception", "regex", "code", "programmer", "developer",
  "script", and the language names Python, JavaScript, TypeScript, Java, C++, C#, Rust, Golang,
  Ruby, PHP, Kotlin, Swift, SQL, Bash, HTML, CSS.
- math, strong: LaTeX commands, anywhere (``\\frac``, ``\\sqrt``, ``\\int``, ``\\sum``, ``\\cdot``,
  ``\\times``, ``\\begin{``); a text that opens with "Solve", "Calculate", "Compute",
  "Prove" or "Evaluate"; "solve for"; digits joined by ``+ * × ÷ ^ ** =`` (``17 * 23``,
  ``3+4=7``). Weak: "solve", "equation", "calculate", "compute", "prove", "how many",
  "how much", "probability", "integral", "derivative", "theorem", "step by step",
  "find the", "percent(age)", geometry words (triangle, circle, radius, diameter,
  hypotenuse, perimeter, polygon), "arithmetic/geometric sequence/series/progression/mean",
  "the sum/product/ratio/remainder/median/average of", digits joined by ``/ < > -`` (the
  minus needs spaces, so dates such as 2024-05-01 do not count).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tuner.workload.model import Request, Workload

TYPES = ("code", "chat", "summarization", "math", "translation", "rag", "other")
TIE_ORDER = ("rag", "summarization", "translation", "code", "math")  # earlier wins a tie
STRONG, WEAK = 2, 1
SYSTEM_FACTOR = 2
MIN_SCORE = 2

_I, _M = re.IGNORECASE, re.MULTILINE
_LANGS = (r"(?:English|French|German|Spanish|Italian|Portuguese|Dutch|Russian|Chinese|Mandarin"
          r"|Japanese|Korean|Arabic|Hindi|Turkish|Polish|Swedish|Greek)")


# A long text is mostly material (an article, documents); its instruction sits at its start or
# its end, so phrase cues are read there only. Code and LaTeX structure counts anywhere.
LONG = 1200
ENDS = 600
# "Documents, then a question": at least this much material before a short closing question.
MATERIAL = 1000
QUESTION = 300
WORD_PROBLEM = 1000  # a word problem is short; longer numeric texts are material


@dataclass(frozen=True)
class Cue:
    kind: str
    weight: int
    pattern: re.Pattern[str]
    anywhere: bool = False  # also matched in the middle of a long text


def _cues(kind: str, weight: int, flags: int, *patterns: str, anywhere: bool = False) -> list[Cue]:
    return [Cue(kind, weight, re.compile(p, flags), anywhere) for p in patterns]


CUES: tuple[Cue, ...] = tuple(
    _cues("rag", STRONG, _I | _M,
          r"^\s*(?:context|documents?|sources?)\s*:",
          r"\bbased (?:only )?on the (?:following|provided|given|above) "
          r"(?:context|documents?|passages?|sources?)",
          r"\banswer (?:only )?(?:from|using)\b",
          r"\busing only the (?:context|documents?|passages?|sources?)\b",
          r"\[doc(?:ument)?\b")
    + _cues("rag", WEAK, _I,
            r"\bretrieved\b", r"\bpassages?\b", r"\bthe context\b", r"\bthe documents?\b",
            r"\baccording to the\b")
    + _cues("summarization", STRONG, _I,
            r"^\s*(?:summari[sz]e|tl;?dr)\b",
            r"\b(?:summari[sz]e|summary of) (?:the following|this|these)\b",
            r"\btl;dr\b",
            r"\bin (?:one|two|three|four|five|\d+) (?:short )?"
            r"(?:sentences?|bullet points?|bullets)\b")
    + _cues("summarization", WEAK, _I,
            r"\bsummar\w*", r"\bkey points\b", r"\bmain points\b", r"\bcondense\w*",
            r"\bshorten\b", r"\brecap\b", r"\babstract:")
    + _cues("translation", STRONG, _I,
            r"^\s*translate\b", rf"\binto {_LANGS}\b", rf"\bfrom {_LANGS} (?:to|into)\b")
    + _cues("translation", WEAK, _I,
            r"\btranslat(?:e|es|ed|ing)\b", r"\btranslation\b", r"\btranslator\b",
            rf"\bto {_LANGS}\b")
    + _cues("code", STRONG, 0, r"```", anywhere=True)
    + _cues("code", STRONG, _M,  # case-sensitive: keywords, not English words
            r"^\s*(?:def|class|import|package|fn|func|public|private) \S",
            r"^\s*from \S+ import\b", r"^\s*#include\b",
            r"^\s*(?:for|while|if|elif|else|try|except|with)\b[^\n]*:\s*$", anywhere=True)
    + _cues("code", STRONG, _I,
            r"\b(?:write|implement|develop|create|build|code) (?:a|an|the|me a|me an) "
            r"(?:[\w+#-]+ ){0,3}?(?:function|program|script|query|class|method|regex|unit tests?"
            r"|algorithm|website|web page|api|endpoint|command-line tool)\b")
    + _cues("code", WEAK, 0, r"\bSELECT ")
    + _cues("code", WEAK, _I,
            r"\bfunctions?\b", r"\breturn ", r"\bbugs?\b", r"\bcompiler?\b", r"\bstack trace\b",
            r"\btraceback\b", r"\bexceptions?\b", r"\bregex\b", r"\bcode\b", r"\bprogrammer\b",
            r"\bdeveloper\b", r"\bscript\b",
            r"\b(?:python|javascript|typescript|java|rust|golang|ruby|php|kotlin|swift|sql|bash"
            r"|html|css)\b",
            r"(?<!\w)(?:c\+\+|c#)(?!\w)")
    + _cues("math", STRONG, 0, r"\\(?:frac|sqrt|int|sum|cdot|times|begin\{)", anywhere=True)
    + _cues("math", STRONG, _I,
            r"^\s*(?:solve|calculate|compute|prove|evaluate)\b", r"\bsolve for\b",
            r"\d\s*(?:[+*×÷^=]|\*\*)\s*\(?-?\d")
    + _cues("math", WEAK, _I,
            r"\bsolve\b", r"\bequations?\b", r"\bcalculate\b", r"\bcompute\b", r"\bprove\b",
            r"\bhow many\b", r"\bhow much\b", r"\bprobability\b", r"\bintegral\b",
            r"\bderivative\b", r"\btheorem\b", r"\bstep by step\b", r"\bfind the\b",
            r"\bpercent(?:age)?\b",
            r"\b(?:triangle|circle|radius|diameter|hypotenuse|perimeter|polygon)s?\b",
            r"\b(?:arithmetic|geometric) (?:sequence|series|progression|mean)\b",
            r"\bthe (?:sum|product|ratio|remainder|median|average) of\b",
            r"\d\s*[/<>]=?\s*\(?-?\d|\d\s+-\s+\(?\d")
)


def _texts(request: Request) -> tuple[str, str]:
    """(system prompt, last user message); a completions prompt counts as the user text."""
    if request.messages is None:
        return "", request.prompt or ""
    system = "\n".join(m["content"] for m in request.messages if m.get("role") == "system")
    users = [m["content"] for m in request.messages if m.get("role") == "user"]
    last = users[-1] if users else request.messages[-1]["content"]
    return system, last


_NUMBER = re.compile(r"(?<![\w.])\$?\d[\d,]*(?:\.\d+)?%?")
_QUANTITY = re.compile(
    r"\bhow (?:many|much|long|far|old|fast|often)\b|\bwhat percent"
    r"|\bwhat (?:is|was|are|were|will be) (?:the|their|his|her|its) (?:total|sum|difference|cost"
    r"|price|value|area|volume|percentage|average|number|amount|profit|speed|distance)\b", _I)
_ASKS = re.compile(r"^(?:who|whom|whose|what|when|where|which|why|how|is|are|was|were|does|do|did"
                   r"|can|could|should|will|would|has|have|had)\b", _I)


def _closing_question(text: str) -> bool:
    """Whether the text ends with a short question after a lot of material (documents)."""
    body, _, last = text.rstrip().rpartition("\n")
    last = last.strip()
    asks = last.endswith("?") or _ASKS.match(last) is not None
    return asks and len(last) <= QUESTION and len(body.strip()) >= MATERIAL


def _structure(text: str, scores: dict[str, int], factor: int) -> None:
    """Cues of a text's shape rather than its words: documents then a question; a word problem."""
    if _closing_question(text):
        scores["rag"] += STRONG * factor
    elif (len(text) < WORD_PROBLEM and len(set(_NUMBER.findall(text))) >= 2
          and _QUANTITY.search(text)):
        scores["math"] += STRONG * factor


def _score(text: str, factor: int, scores: dict[str, int]) -> None:
    if not text:
        return
    ends = text if len(text) <= LONG else f"{text[:ENDS]}\n{text[-ENDS:]}"
    for cue in CUES:
        if cue.pattern.search(text if cue.anywhere else ends):
            scores[cue.kind] += cue.weight * factor
    _structure(text, scores, factor)


def scores(request: Request) -> dict[str, int]:
    """Points per type (in TIE_ORDER) from the cues; what `classify` decides on."""
    system, user = _texts(request)
    result = dict.fromkeys(TIE_ORDER, 0)
    _score(system, SYSTEM_FACTOR, result)
    _score(user, 1, result)
    return result


def classify(request: Request) -> str:
    """The request's workload type; see the module docstring for the rules."""
    if request.type is not None:
        return request.type
    points = scores(request)
    best = max(TIE_ORDER, key=lambda kind: (points[kind], -TIE_ORDER.index(kind)))
    if points[best] >= MIN_SCORE:
        return best
    return "chat" if request.is_chat else "other"


def split_requests(requests: Iterable[Request]) -> dict[str, list[Request]]:
    """Requests grouped by type (first appearance order), each with its ``type`` set."""
    groups: dict[str, list[Request]] = {}
    for request in requests:
        kind = classify(request)
        groups.setdefault(kind, []).append(replace(request, type=kind))
    return groups


def split_workload(workload: Workload) -> dict[str, list[Request]]:
    """The workload's requests grouped by `classify`; file order is kept inside a group."""
    return split_requests(workload.requests)
