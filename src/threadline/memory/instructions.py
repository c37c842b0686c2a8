"""What a coding agent's user said that stays true: the clauses worth remembering.

A coding session's user turn is a request. Most of it is the task of the moment
("count the lines", "try again", "undo the last change"); what a person working
with that user would write down is smaller: standing constraints and preferences
("don't produce code, design first", "don't commit until the final step"), where
things go ("create the document in /specs"), project conventions and environment
facts ("the new file is in the same folder as the old one"), and the spec as it
stands ("each piece has a cooldown of 10 seconds"). ``clauses`` cuts a request
into such clauses, each one short sentence without its conversational frame
("That's almost right. But ...", "Make it so ..."), a clause that leans on the one
before it with a pronoun joined to it, and leaves out questions, one-off commands,
pasted output (diffs, tracebacks, commands), the state a request ends ("currently
...") and prompt templates.

``revision`` says how a turn relates to the instruction before it: it undoes it
("undo the last change"), goes back ("go back to the version where ..."), revises
it ("That's almost right. But ...") or describes it anew ("Let me describe X
differently", which replaces the whole run of revisions before it); the extractor
makes such a turn supersede the earlier instruction, and an undone one leaves an
event saying the change made for it was reverted (never the instruction's
opposite). A clause also retires the earlier one it contradicts by meaning
(``retire``: "there is no AI", "X only writes Y").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from threadline.memory.base import Fact
from threadline.memory.retire import canonical, exclusive, negated
from threadline.memory.rules import derive_slot
from threadline.memory.statements import content_words, is_question, third_person

MAX_CLAUSE_WORDS = 30
"""A clause longer than this is a task description or a paste, not a thing to remember."""
MIN_CLAUSE_WORDS = 4
MAX_TEMPLATE_FREE_CHARS = 600
"""A user turn longer than this with Markdown structure is a prompt template."""

Revision = Literal["undo", "back", "revise", "anew"]

_REVISIONS: tuple[tuple[Revision, re.Pattern[str]], ...] = (
    (
        "undo",
        re.compile(
            r"^\s*(?:please\s+)?(?:undo|revert|roll\s*back)\b(?:\s+(?:the|that|this|your|my))?"
            r"(?:\s+last)?(?:\s+(?:change|changes|edit|edits|commit|one|it|that))?\b",
            re.I,
        ),
    ),
    (
        "back",
        re.compile(r"\b(?:go|goes|going|went)\s+back\s+to\b|\brestore\s+the\s+previous\b", re.I),
    ),
    (
        "anew",
        re.compile(r"^\s*(?:let\s+me|i'?ll)\s+(?:describe|explain|put)\b.*\bdifferently\b", re.I),
    ),
    (
        "revise",
        re.compile(
            r"^\s*(?:that'?s|that\s+is|it'?s|this\s+is)\s+(?:almost|nearly|not\s+quite|close)\b"
            r"|^\s*actually\b",
            re.I,
        ),
    ),
)
"""How a turn changes the instruction before it, first match wins: each pattern is
searched for; the ``^`` of "undo", "anew" and "revise" holds them to the turn's start.
"anew" ("Let me describe the highlight differently: ...") replaces the whole run of
revisions before it, not only the latest turn."""
_FRAME_RE = re.compile(
    r"^(?:(?:that'?s|that\s+is|it'?s|this\s+is)\s+(?:almost\s+|nearly\s+|much\s+|a\s+lot\s+)?"
    r"(?:right|good|better|great|fine|ok(?:ay)?|correct|close|it)\b|"
    r"(?:hi|hello|hey|great|good|ok(?:ay)?|perfect|nice|cool|thanks|yes|no|now|so|also|and|"
    r"but|however|"
    r"then|first|finally|ultrathink|please|more\s+context|in\s+addition|the\s+main\s+idea\s+"
    r"is\s+fine|try\s+to\s+make\s+it\s+so(?:\s+that)?|i\s+just\s+want\s+to|let'?s|let\s+us|"
    r"make\s+it\s+so(?:\s+that)?|"
    r"make\s+sure(?:\s+that)?(?=\s+(?:the|a|an|each|every|all|this|it)\b)|"
    r"change\s+the\s+rule\s+such\s+that|for\s+now|"
    r"go\s+back\s+to\s+(?:the\s+)?(?:version|state|way)\s+(?:where|in\s+which|that))\b)"
    r"[\s,.:;!-]*",
    re.I,
)
"""The conversational frame around what is asked: acknowledgements, "Make it so"."""
_ONE_OFF_RE = re.compile(
    r"^(?:try\s+(?:again|to\s+fix)|undo|revert|implement|count|show|launch|run|give|explain|tell|"
    r"continue|proceed|go\s+ahead|do\s+it|add\s+that|update\s+the\s+\S+\s+document|"
    r"come\s*up\s+with|"
    r"update\s+phase|review|describe|make\s+a\s+(?:new\s+)?proposal|have\s+another\s+go|"
    r"carefully\s+review|search\s+for|analy[sz]e|check|fix|rewrite|go\s+forward)\b",
    re.I,
)
"""Commands for the moment: done once, nothing to keep."""
_KEEP_RE = re.compile(
    r"\b(?:don'?t|do\s+not|never|always|must|mustn'?t|should|shouldn'?t|only|no\s+longer|"
    r"instead|important|keep\s+in\s+mind|make\s+sure|avoid|prefer|not|no)\b"
    r"|(?:^|\s)(?:in|into|under|to)\s+(?:the\s+)?[~.]?/\S+|\bput\b",
    re.I,
)
"""Signs of a standing constraint or convention: a one-off verb with one of these stays."""
_PASTE_RE = re.compile(
    r"^\s*(?:[>$#|`]|\d+\s*\||at\s+\S+\(|Traceback|Error:|\w+Error\b|[-=_]{3,}|"
    r"(?:Prompt|Response|Timestamp)\s*(?:#\d+)?:|\+(?:\s|$)|@@\s|File\s+\"[^\"]+\",\s+line\s+\d)"
)
"""A line of pasted output, code, a diff ("+ import x", "@@ -1,3"), a traceback's frame
(``File "app.py", line 5``) or a log, not the user's own words (a command continued on
the next line, ending in a backslash, is cut off in ``_pieces``)."""
_FRAME_LINE_RE = re.compile(r'\s*File\s+"[^"]+",\s+line\s+\d')
_ERROR_RE = re.compile(
    r"\b(?:error|errors|exception|traceback|blocked|fails?|failing|failed|broken|crash(?:es|ed)?|"
    r"(?:doesn'?t|does\s+not)\s+(?:seem\s+to\s+)?(?:be\s+)?work(?:ing)?|"
    r"(?:doesn'?t|does\s+not|didn'?t|did\s+not)\s+(?:create|write|generate|show|start|load)|not\s+working|isn'?t\s+working|nothing\s+happens|"
    r"i'?m\s+getting|didn'?t\s+(?:work|write|create)|still\s+getting|"
    r"(?:don'?t|doesn'?t|can'?t)\s+see)\b",
    re.I,
)
_EXAMPLE_INTRO_RE = re.compile(
    r"(?:\beg|e\.g\.|example|getting|output|looks\s+like|response|current\b.*|"
    r"^\W*(?:please\s+)?(?:run|execute|try)\s+(?:this|these|the\s+following)(?:\s+\w+)?):\s*$",
    re.I,
)
"""A line that introduces pasted text ("Example of the current file:", "run this:"); the
paste runs to the next blank line."""
_NAMED_RE = re.compile(r"(?<![\w/])[~.]?/?(?:[\w.-]+/)*[\w-]+\.[a-z]{1,6}\b")
_THERE_RE = re.compile(r"\bthere(?=\s*[.!]?$)")
_THIS_FILE_RE = re.compile(r"\b(?:this|that|the\s+same)\s+file\b(?!\s+(?:called|named))", re.I)


def _pointed(clause: str, named: str) -> str:
    """``clause`` with "there" and "this file" as the file the turn named before it
    ("The script didn't write x.jsonl. Make it so it generates this file" -> x.jsonl)."""
    if not named:
        return clause
    return _THIS_FILE_RE.sub(named, _THERE_RE.sub(f"in {named}", clause))


_WORD_RE = re.compile(r"[^\W_]+")
MAX_LEANING_WORDS = 8
"""A clause this short that opens with a pronoun leans on what came before it: not
standalone, so no fact of its own (it joins the clause before it in its turn, if any)."""
MAX_JOINED_WORDS = MAX_CLAUSE_WORDS + 10
"""A clause and the ones leaning on it ("The cooldown is a circle. At 10 seconds, it's a
full circle. It progresses like a clock") stay one fact up to this many words."""
_LEANING_RE = re.compile(
    r"^(?:[^,]{1,30},\s+)?(?:this|that|it|they|these|those|them)\b(?!\s*['’]?s\s+important)"
    r"|^change\s+the\s+\w+\s+to\s+this\b|\b(?:this|that|it)\.$",
    re.I,
)
_ADDING_RE = re.compile(r"^\W*(?:\d{1,2}\s*[.:)]\s*)?(?:in\s+addition|also|plus|and)\b", re.I)
"""A short piece that adds to the one before it ("in addition - there is timestamp and
session id"): it joins that clause."""
_INTRO_RE = re.compile(r"^(?:this|that|it|here)(?:\s+is|'s|’s)\s+(?:what|how)\b", re.I)
"""What introduces a paste ("This is what the output looks like"): nothing of its own."""
_CONFUSED_RE = re.compile(
    r"^(?:i'?m\s+|i\s+am\s+)?(?:not\s+(?:getting|following|sure\s+(?:about|what|why))|"
    r"(?:i\s+)?(?:don'?t|do\s+not)\s+(?:get|understand|follow))\b",
    re.I,
)
"""The user not following the reply ("not getting about finalizing all sessions"): about
the conversation, not a thing to keep."""
_BEFORE_RE = re.compile(r"^currently\b|\s*\(\s*currently\b[^)]*\)", re.I)
"""How things are before the change asked for ("Currently they change size"): the state
the request ends, never a standing fact."""
_LIST_MARK_RE = re.compile(r"^\s*(?:\d{1,2}\s*[.:)]|[-*•])\s+")
_DESCRIBE_RE = re.compile(r"^(?:let\s+me|i'?ll)\s+(?:describe|explain|put)\b[^:]*:\s*", re.I)


_TEMPLATE_RE = re.compile(r"^\s*#{1,3}\s+\S|\$ARGUMENTS|^Arguments:\s*$|\*\*[^*\n]+\*\*", re.M)
_QUOTED_BLOCK_RE = re.compile(r"```.*?(?:```|\Z)", re.S)
_PIECE_BREAK_RE = re.compile(r"(?<=[.!?])\s+|\s*\n\s*|;\s+|:\s+(?=[\"“])")


@dataclass(frozen=True, slots=True)
class Clause:
    text: str
    """Distilled: frame off, first letter upper case, ending with a full stop."""
    kind: str
    """``preference`` for a constraint or preference, else ``fact``."""


def is_template(text: str) -> bool:
    """A prompt template or a bot's notice pasted as the user's turn (a PR recipe with
    bold numbered steps, "# Code Review ..."): no person's words to remember."""
    if re.match(r"\s*#{1,3}\s+\S", text):
        return True
    marks = len(_TEMPLATE_RE.findall(text))
    return len(text) > MAX_TEMPLATE_FREE_CHARS / 2 and marks >= 3


_NOT_FAILING_RE = re.compile(
    r"(?i)\b(?:won'?t|will\s+not|shouldn'?t|should\s+not|must\s+not|mustn'?t|never|not|"
    r"without\s+being)\s+(?:be\s+|get\s+)?(?:broken|break|fail\w*|crash\w*)\b"
)
"""A failure said not to happen ("old clients won't be broken"): a constraint, no report."""


def reports_error(text: str) -> bool:
    """Whether a user's turn says something failed (so the reply is the fix to keep); a
    prompt template's words are no report of the person's."""
    if is_template(text):
        return False
    return _ERROR_RE.search(_NOT_FAILING_RE.sub(" ", text)) is not None


def revision(text: str) -> Revision | None:
    """How a turn changes the instruction before it, if it does."""
    return next((how for how, pattern in _REVISIONS if pattern.search(text)), None)


def distil(piece: str) -> str:
    """``"That's almost right. But make it so the cooldown starts at the top"`` ->
    ``"The cooldown starts at the top."``: the frame off, one clean sentence."""
    out = _DESCRIBE_RE.sub("", _LIST_MARK_RE.sub("", piece.strip())).strip().strip("\"'“”")
    while True:
        cut = _FRAME_RE.sub("", out, count=1).strip()
        if cut == out:
            break
        out = cut
    out = re.sub(r"\s+", " ", out).strip(" ,;:-")
    if out.count(")") > out.count("("):  # "... no longer specified)": its "(" was cut off
        out = re.sub(r"\)(?=[.!]?$)", "", out)
    elif out.count("(") > out.count(")"):  # "the only mode (you don't ...": its ")" was too
        out = out[: out.rindex("(")].rstrip(" ,;:-")
    if not out:
        return ""
    if re.fullmatch(r"[a-z]+(?:['’][a-z]+)?", out.split()[0]):
        out = out[:1].upper() + out[1:]
    return out if out[-1] in ".!" else out + "."


def _pieces(text: str) -> list[str]:
    """The user's own sentences: pasted blocks, output and examples off, hard-wrapped
    lines joined."""
    text = _QUOTED_BLOCK_RE.sub("\n", text)
    lines: list[str] = []
    pasting = opening = False
    pasted = ""
    """The line before, when it was pasted."""
    for line in text.splitlines():
        if pasting:  # the paste: its blank lines at the start, then up to a blank line
            if line.strip():
                opening = False
                continue
            if opening:
                continue
            pasting = False
        if _EXAMPLE_INTRO_RE.search(line):
            pasting = opening = True
            continue  # "Example of the current file:": it introduces the paste
        if _PASTE_RE.match(line):
            pasted = line
            continue
        if line.rstrip().endswith(" \\"):  # a command continued on the next line
            line = line.rpartition(": ")[0]  # "Their example uses CURL: curl -X POST ..."
            if not line.strip():
                continue
        if _FRAME_LINE_RE.match(pasted) and line[:1].isspace():
            pasted = ""
            continue  # the code line a traceback's frame shows
        pasted = ""
        wrapped = lines and lines[-1] and not lines[-1].rstrip().endswith((".", "!", "?", ":"))
        if wrapped and line[:1].isspace() and line.strip()[:1].islower():
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(line.strip())
    return [p for p in _PIECE_BREAK_RE.split("\n".join(lines)) if p and p.strip()]


def own_words(text: str) -> str:
    """What the user typed in a turn, less pastes, output and templates."""
    return "" if is_template(text) else "\n".join(_pieces(text))


def clauses(text: str) -> list[Clause]:
    """The clauses of a user's request worth remembering (see the module docstring)."""
    if is_template(text) or revision(text) == "undo":
        return []
    out: list[Clause] = []
    named = ""
    """The file or path the turn named last: what a later "there" points at."""
    label = ""
    """The name a list item opens with ("ai.js: Evaluation; imports helpers"): the
    subject of the item's later pieces that leave it out."""
    files_listed: list[str] = []
    """The files a list's items are named by ("- rules.js: ...", "- ai.js: ...")."""
    at: int | None = None
    joinable = False
    """Whether the last clause kept came from the piece just before: what a pronoun
    leans on (a question or a paste in between and it leans on something not kept)."""
    for raw in _pieces(text):
        before, files = named, _NAMED_RE.findall(raw)
        named = files[-1] if files else named
        if is_question(raw) or reports_error(raw):
            joinable = False
            continue
        head = _LABEL_RE.match(raw)
        if head is not None or _LIST_MARK_RE.match(raw):
            label = head.group(1) if head is not None else ""
            if _FILE_LABEL_RE.fullmatch(label) and label not in files_listed:
                files_listed.append(label)
                at = at if at is not None else len(out)
        piece = _with_label(raw, label)
        if piece is None:
            joinable = False
            continue  # "Controlled by a single player": no subject, none to give it
        said = [c for part in _requests(piece) for c in _run_on(distil(part))]
        for k, clause in enumerate(said):
            adds = k == 0 and _ADDING_RE.match(raw) is not None
            found = _kept(_pointed(clause, before), adds)
            joined = _joined(out[-1], found) if found and found.leaning and joinable else None
            if joined is not None:
                out[-1] = joined
            elif found is not None and not found.short:
                out.append(found.clause)
            else:
                joinable = False
                continue  # no fact, or too short to stand alone: "This is all implemented"
            joinable = True
    if len(files_listed) >= MIN_LISTED_FILES and at is not None:
        names = ", ".join(files_listed[:-1]) + f" and {files_listed[-1]}"
        out.insert(at, Clause(f"The files are {names}.", "fact"))
    return out


@dataclass(frozen=True, slots=True)
class _Found:
    clause: Clause
    leaning: bool
    """It leans on the clause before it (a pronoun, or a short "in addition - ...")."""
    short: bool
    """It opens with a pronoun and is too short to stand alone ("This is implemented")."""


def _kept(clause: str, adds: bool) -> _Found | None:
    """A distilled clause as kept (None when it is no fact: too short or long, the
    user's confusion, the state the request ends, a one-off command)."""
    n = len(_WORD_RE.findall(clause))
    if not clause or n < MIN_CLAUSE_WORDS or n > MAX_CLAUSE_WORDS:
        return None
    if len(content_words(clause)) < 2 or _CONFUSED_RE.match(clause):
        return None  # "Not getting about finalizing all sessions": about the reply
    if _BEFORE_RE.match(clause) or _INTRO_RE.match(clause):
        return None  # "Currently they change ...": what the request ends; an intro
    clause = _BEFORE_RE.sub("", clause)
    keep = _KEEP_RE.search(clause) is not None
    if _ONE_OFF_RE.match(clause) and not keep:
        return None
    short = n <= MAX_LEANING_WORDS
    pronoun = _LEANING_RE.match(clause) is not None
    return _Found(
        Clause(clause, "preference" if keep else "fact"),
        pronoun or (adds and short),
        pronoun and short,
    )


def _joined(before: Clause, found: _Found) -> Clause | None:
    """A clause leaning on ``before`` joined to it as one fact, when the two are not too
    long together."""
    clause = found.clause.text
    text = f"{before.text.rstrip('.!')}; {clause[:1].lower()}{clause[1:]}"
    if len(_WORD_RE.findall(text)) > MAX_JOINED_WORDS:
        return None
    kind = "preference" if "preference" in (before.kind, found.clause.kind) else "fact"
    return Clause(text, kind)


MIN_LISTED_FILES = 3
"""A list of this many items each named by a file is a layout: one fact names them all
("The files are rules.js, ai.js and ui.js."), what a person keeps of it."""
_FILE_LABEL_RE = re.compile(r"[\w./-]+\.[a-z]{1,6}")
_LABEL_RE = re.compile(r"^\s*(?:[-*•]\s+)?([\w./-]+\.\w{1,6}|`[^`]+`):\s")
_SUBJECTLESS_RE = re.compile(
    r"^\s*(?:for\s+now\s+|now\s+|and\s+|also\s+)?(?:(?P<verb>[a-z]+s)\s+(?!(?:is|are|was|were|"
    r"should|must|will|can|have|has|need|do|does|don't|doesn't)\b)|[a-z]+ed\s+by\b)",
    re.I,
)
"""A piece that opens with a verb, its subject left out: "imports helpers from
rules.js" (a third-person verb), "controlled by a single player" (a participle)."""
_COORDINATED_RE = re.compile(
    r"\s+and\s+(?=(?:have|make|add|remove|use|change|fix|try|put|keep|update|create|give|"
    r"show|then)\b)",
    re.I,
)
"""Where a request joins a second imperative ("... and have another go at ...")."""


def _requests(piece: str) -> list[str]:
    """A piece cut where a one-off request is joined to it ("make sure the board is even
    and have another go at the piece design": kept whole, the one-off part turns the
    first into a false statement); whole when what is joined stays (a spec's "and")."""
    parts = _COORDINATED_RE.split(piece)
    if len(parts) > 1 and all(_ONE_OFF_RE.match(distil(p)) for p in parts[1:]):
        return parts
    return [piece]


_NOT_VERB_S = frozenset("this thus always perhaps various focus status class canvas css".split())  # noqa: SIM905


def _with_label(piece: str, label: str) -> str | None:
    """A piece with the subject it left out: the list item's name ("imports helpers from
    rules.js" under "ai.js:" -> "ai.js imports helpers from rules.js"); None when there is
    none to give (a fragment is no fact); the piece as it is when it has a subject."""
    m = _SUBJECTLESS_RE.match(piece)
    if m is None or (m["verb"] or "").lower() in _NOT_VERB_S:
        return piece
    if not label:  # "Tests pass on CI" may be a noun and its verb; "imports x" is not
        return piece if m["verb"] and m["verb"][:1].isupper() else None
    body = piece[m.start("verb") :] if m["verb"] else piece.strip()
    return f"{label.strip('`')} {body[:1].lower()}{body[1:]}"


_RUN_ON_RE = re.compile(
    r"\s+(?=(?:it|this|that|we|they|you|i)\s+(?:should|must|will|can|needs?|has\s+to|"
    r"have\s+to)\b)|,\s+(?=but\b|however\b)",
    re.I,
)


def _run_on(clause: str) -> list[str]:
    """A sentence typed without stops, cut where a new clause begins ("... use X it
    should also include Y"), when it is too long to keep whole."""
    if len(_WORD_RE.findall(clause)) <= MAX_CLAUSE_WORDS:
        return [clause]
    out: list[str] = []
    purpose = False
    for p in (p for p in _RUN_ON_RE.split(clause) if p.strip()):
        if not purpose:  # "..., so that you can figure out ...": the aim of what is asked
            out.append(distil(p))
        purpose = re.search(r"\b(?:so(?:\s+that)?|in\s+order\s+to)[\s,]*$", p, re.I) is not None
    return out


FIX_RE = re.compile(
    r"\b(?:because|caused\s+by|the\s+(?:cause|problem|issue|bug|error)\s+(?:was|is)|fixed|"
    r"resolved|happens\s+(?:when|because)|instead\s+of|was\s+failing|root\s+cause)\b",
    re.I,
)
"""A reply's sentence that says why something failed or what made it work."""
MAX_GIST_WORDS = 15
MAX_FIX_WORDS = 45
REVISION_OVERLAP = 0.5
"""Share of shared terms (of the two clauses' terms together) that makes a later clause a
restatement of an earlier one (the same spec said again, revised)."""

REQUEST_SLOT = "request"
"""The slot prefix of a user's instruction: each its own chain until revised."""
REVISED_OVERLAP = 0.15
"""The least share of shared terms by which a revising turn's clause continues a clause
of the turn it revises ("That's almost right. But the highlight ..." -> the highlight)."""
Stated = tuple[str, str, str | None]
"""``(statement, kind, slot)``: what a coding turn states, and the chain it belongs to."""
FIX_SLOT = "fix"
"""The slot prefix of a fix the assistant gave: its chain is the assistant's, whoever
says later that it did not work."""


def _overlap(a: str, b: str) -> float:
    ta, tb = canonical(a), canonical(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


_GETTING_RE = re.compile(r"^\s*(?:i'?m\s+(?:still\s+)?getting|i\s+get|error)\s*:?\s*", re.I)


def error_gist(text: str) -> str:
    """The first words of what a user reported as failing (the frame "I'm getting:" off)."""
    for line in text.splitlines():
        line = _GETTING_RE.sub("", line)
        if len(line.split()) >= 3:
            words = line.split()
            gist = " ".join(words[:MAX_GIST_WORDS]).rstrip(".:,;")
            return gist + (" ..." if len(words) > MAX_GIST_WORDS else "")
    return ""


REVERTED = "Reverted at the user's request:"
"""How an event says a change was undone: the change made for the instruction, not the
instruction's meaning ("undo that" takes back what was done, it does not say the opposite)."""


def reverted(clause: str, why: str = "") -> str:
    """``Reverted at the user's request: the change for "<clause>" (<why>).``"""
    said = clause.rstrip(".!")
    return f'{REVERTED} the change for "{said}"' + (f" ({why})." if why else ".")


def _reason(text: str) -> str:
    """Why the user undid a change, when the undo says it ("undo the last change it
    messed up the dark highlight" -> "it messed up the dark highlight")."""
    m = _REVISIONS[0][1].search(text)
    rest = text[m.end() :] if m is not None else ""
    rest = re.split(r"(?<=[.!?])\s|\n", rest.strip(" ,;:-"), maxsplit=1)[0].strip(" .!")
    rest = re.sub(r"^(?:because|as|since)\s+", "", rest, flags=re.I)
    if len(rest.split()) < 3 or len(rest.split()) > MAX_GIST_WORDS or is_question(rest):
        return ""
    return rest


@dataclass
class RequestLog:
    """The instructions of one session so far, so that a later turn can revise, undo
    or restate them: each clause is a chain of its own (a slot under the subject
    "user"), and a turn that revises, undoes or restates it continues that chain, so
    the earlier version is superseded instead of standing beside the new one."""

    session_id: str
    kept: list[tuple[str, str]] = field(default_factory=list)
    """``(clause, slot)`` of every current clause, oldest first."""
    last: list[tuple[str, str]] = field(default_factory=list)
    """The clauses of the latest turn that stated any."""
    run: list[tuple[str, str]] = field(default_factory=list)
    """The clauses of the latest run of turns that revise one another ("That's almost
    right. But ..." after "That's almost right. But ..."): one spec, said over turns."""
    error: str | None = None
    """What the latest user turn reported as failing, until a reply says how it was fixed."""
    fix: tuple[str, str] | None = None
    """``(statement, slot)`` of the latest fix, until the user's next turn."""

    @classmethod
    def resumed(cls, session_id: str, known: Sequence[Fact]) -> RequestLog:
        """The log as the session's stored facts left it (``known``: its current facts,
        oldest first): its instructions, the latest turn's among them."""
        log = cls(session_id)
        mine = [f for f in known if f.slot and f.slot.startswith(REQUEST_SLOT)]
        current = [
            f for f in mine if f.superseded_by is None and not f.retracted and f.kind != "event"
        ]
        log.kept = [(f.statement, f.slot or "") for f in current]
        last_seq = max((f.seq or 0 for f in current), default=None)
        log.last = [(f.statement, f.slot or "") for f in current if f.seq == last_seq]
        log.run = list(log.last)
        return log

    def _slot(self, kind: str, seq: int, i: int) -> str:
        digest = hashlib.sha1(f"{self.session_id}:{seq}:{i}".encode()).hexdigest()[:12]
        return f"{kind} {digest}"

    def _continues(self, clause: str, how: Revision | None, taken: set[str]) -> str | None:
        """The slot of the earlier clause ``clause`` revises or restates, if any: the
        closest clause of the turn it revises, else a clause it mostly repeats."""
        pool = {"revise": self.last, "anew": self.run}.get(how or "", self.kept)
        scored = [(_overlap(clause, old), slot) for old, slot in pool if slot not in taken]
        score, slot = max(scored, default=(-1.0, ""))
        bar = {None: REVISION_OVERLAP, "anew": 0.0}.get(how, REVISED_OVERLAP)
        return slot if score >= bar else None

    def user_turn(self, text: str, seq: int) -> list[Stated]:
        out: list[Stated] = []
        if self.fix is not None and reports_error(text):
            statement, slot = self.fix
            out.append((f"A fix did not work: {statement}", "event", slot))
        self.fix = None
        self.error = error_gist(text) if reports_error(text) else None
        how = revision(text)
        mine: list[tuple[str, str]] = []
        taken: set[str] = set()
        ruled_out: list[str] = []
        """Slots of earlier clauses this turn's clauses rule out beyond the one each takes."""
        for i, c in enumerate(clauses(text)):
            statement = third_person(c.text, "the user", keep_we=True)
            if not c.text.split()[0].isalpha():  # "rules.js: ..." stays as written
                statement = c.text[:1] + statement[1:]
            others = exclusive(c.text, self.kept, taken)
            slot = (
                self._continues(c.text, None, taken)  # said again: its own chain, first
                or (others.pop(0) if others else None)  # "only": then what it rules out
                or self._continues(c.text, how, taken)
                or negated(c.text, self.kept, taken)
                or derive_slot(statement)
                or self._slot(REQUEST_SLOT, seq, i)
            )
            taken.add(slot)
            ruled_out += others
            mine.append((statement, slot))
            out.append((statement, c.kind, slot))
        if how in ("undo", "back"):
            why = _reason(text) if how == "undo" else ""
            before = {slot: clause for clause, slot in self.kept}
            undone = [(c, s) for c, s in self.last if s not in taken]
            undone += [(old, s) for s, old in ((s, before.get(s)) for s in ruled_out) if old]
            for clause, slot in undone:
                if slot not in taken:
                    out.append((reverted(clause, why), "event", slot))
                    taken.add(slot)
        if how in ("revise", "anew"):
            self.run = [(c, s) for c, s in self.run if s not in taken] + mine
        else:  # any other turn ends the run, whether it said anything to keep or not
            self.run = mine
        if mine or how in ("undo", "back"):
            self.kept = [(c, s) for c, s in self.kept if s not in taken] + mine
            self.last = mine
        return out

    def reply(self, text: str, seq: int) -> list[Stated]:
        """The fix an assistant's reply gives for the error the user reported, if it
        says one (why it failed, what made it work)."""
        if not self.error:
            return []
        found = [
            s
            for s in re.split(r"(?<=[.!?])\s+|\n+|(?<=[.!?:])\s+(?=[-*•]\s)", text)
            if FIX_RE.search(s) and not _LIST_MARK_RE.match(s)
        ]  # a bullet ("- The fallback now marks ... instead of ...") is the change log
        if not found:
            return []
        words = " ".join(found[:2]).split()
        fix = " ".join(words[:MAX_FIX_WORDS]) + (" ..." if len(words) > MAX_FIX_WORDS else "")
        statement = f'Fix for "{self.error}": {fix}'
        slot = self._slot(FIX_SLOT, seq, 0)
        self.fix, self.error = (statement, slot), None
        return [(statement, "event", slot)]
