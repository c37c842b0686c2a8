"""Key Decisions: the person's constraints, their answers, and the agent's reasoned choices.

A resumed agent needs to know why the work is the way it is. Three kinds of
statement say so, each recognised by its grammar, never by its topic:

* **the person's constraints and choices**, from what they typed: a negative or
  an absolute ("don't fake it", "never push", "manual commit only", "always
  run the linter"), a choice between options ("use X instead of Y", "go with
  option 1"), a naming or spelling rule ("call it X", "use British spelling"),
  a request that gives its reason ("track it in the same file, so that old
  clients won't break"). A plain request ("make the circle larger") counts
  less. A later message of the person on the same subject that says it replaces
  ("instead", "go back to", "undo", ``REPLACES``) replaces an earlier choice: it is
  marked ``(replaced: ...)``, not dropped silently; one that adds to it leaves it;
* **their verdicts** on what the agent proposed: answers to its questions, an
  approved plan and the reasoned lines of that plan, a tool call turned down
  with what they said instead (``verdicts.py`` reads those records);
* **the agent's choices with their reason**, only when the sentence states a
  choice of the agent's own ("Rather than modifying the interface, let me add
  a helper", "I'll use X because Y", "I went with X instead of Y") and the
  message carried it out (a tool call that changes something), or reports it
  done. Narration ("Let me check ..."), observations ("I see - X uses Y
  rather than Z") and steps the work simply requires ("I need to add it back
  since ...") are not decisions.

Text the agent was given rather than said (meta records, skill bodies,
AGENTS.md, reminders, summaries of earlier spans) never reaches this module:
the caller hands it only what the person typed and what the agent wrote.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from threadline.compaction.snapshot import clip_words, words
from threadline.compaction.values import split_words
from threadline.compaction.verdicts import redirects, rejects, topic_words

_APOSTROPHE = "['\u2019]"


class _Texted(Protocol):
    @property
    def text(self) -> str: ...


B = TypeVar("B", bound=_Texted)
USER_DECISION_FACTOR = 1.3
"""A constraint the person set outweighs anything the agent chose."""
REQUEST_FACTOR = 0.6
"""A plain request ("make the circle larger") is a choice, but not a standing rule."""
CONTRAST_FACTOR = 0.8
RATIONALE_FACTOR = 0.6
"""An agent's step with only its reason ("I'll add a nowarn since MapSet is opaque")."""
GO_AHEAD_WORDS = 10
REPLACED_FACTOR = 0.5
"""A replaced choice still tells the history, at half its weight."""
REPLACING_WORDS = 12
"""What replaced a choice is quoted in this many words."""
SHARED_TOPIC = 2
"""Distinctive topic words a later statement must share with a choice to replace it..."""
COMMON_SHARE = 0.25
"""...words in more than this share of the person's messages (and at least
``COMMON_MIN`` of them) are the session's subject, not a choice's."""
COMMON_MIN = 3
MAX_PLAN_DECISIONS = 3
"""Reasoned lines of an approved plan kept as decisions."""

DECISION = re.compile(
    r"\b(?:(?<!before\s)(?<!whether\s)decid(?:e|ed|es)|decision|chose|choose|chosen|"
    r"opt(?:ed|ing)?\s+(?:for|to)|agree(?:d|s)?|settled\s+on|going\s+with|go\s+with|"
    r"went\s+with|stick(?:ing)?\s+with|prefer(?:red|s)?|switch(?:ed|ing)?\s+(?:to|from)|"
    rf"we(?:{_APOSTROPHE}ll|\s+will|\s+should|\s+are\s+going\s+to)\s+"
    r"(?:use|keep|go|switch|stick|adopt))\b",
    re.I,
)
"""Words that record a choice."""
CONTRAST = re.compile(r"\b(?:instead\s+of|rather\s+than|in\s+favou?r\s+of)\b", re.I)
RATIONALE = re.compile(
    r"\b(?:because|since|so\s+that|so\s+it|to\s+avoid|to\s+keep|to\s+prevent|as\s+it|"
    r"which\s+keeps|otherwise)\b",
    re.I,
)
"""A reason given for a choice."""
GO_AHEAD = re.compile(
    r"(?i)^(?:(?:ok(?:ay)?|yes|great|good|please|then|now|so)\W+)*(?:let['\u2019]?s\s+)?"
    r"(?:implement|do|build|proceed\s+with|continue\s+with|go\s+(?:ahead\s+)?with|finish|"
    r"make\s+sure)\b(?:\s+(?:it|this|that|these|them|all|is|are|everything|and|"
    r"implemented|functional|working|done|complete|now|then|please))*\s*[.!]?$"
)
"""A go-ahead whose object is only a pronoun: it approves what came before."""
_CHORE = re.compile(r"(?:(?:also|still|then)\s+)?(?:needs?|have|has)\s+to\b", re.I)
"""A step the work requires, which the agent will simply do: a chore, not a decision."""
LOOKING = re.compile(
    r"(?:check|look|see|read|view|examine|explore|find|search|open|inspect|investigate|verify|"
    r"review|understand|run|try|test|confirm|debug|figure|make\s+sure|ensure|wait|start)\b",
    re.I,
)
"""The verbs of an agent finding things out: narrating them is not deciding anything."""
NARRATION = re.compile(
    r"^(?:(?:now|next|then|first|finally|ok(?:ay)?|good|great|perfect|alright|so|also)\b"
    r"[,!.:]?\s+)*(?:let\s+me|let['\u2019]?s|let\s+us|"
    rf"I{_APOSTROPHE}ll|I\s+will|I{_APOSTROPHE}m\s+going\s+to|I\s+am\s+going\s+to|I\s+need\s+to|"
    r"I\s+should|I\s+can|we\s+need\s+to|we\s+can|to\s+\w[^,]{0,80},\s+I)\b",
    re.I,
)
"""The assistant telling its next move ("Now let's add", "Let me check"): not a decision."""
NOTE_LEAD = re.compile(
    r"^(?:(?:now|next|then|first|finally|ok(?:ay)?|good|great|perfect|alright|also|and|so)\b"
    r"[,!.:]?\s+)*(?:(?:let\s+me|let['\u2019]?s|let\s+us|"
    rf"I{_APOSTROPHE}ll|I\s+will|I{_APOSTROPHE}m\s+going\s+to|I\s+am\s+going\s+to|I\s+need\s+to|"
    rf"we\s+need\s+to|we{_APOSTROPHE}ll|we\s+will|I\s+should|we\s+should|I{_APOSTROPHE}m|"
    r"I\s+am|we\s+are)\s+)?(?:(?:also|now|just|first|then)\s+)?",
    re.I,
)
"""The lead-in of an agent's account of its next step, before the verb."""
_IMPERATIVE = re.compile(
    r"^(?:(?:please|also|and|but|so|then|just|now|ok(?:ay)?|again|still)\b[,]?\s+)*"
    rf"(?:don{_APOSTROPHE}?t|do\s+not|never|always|make\s+sure|ensure|avoid|must|only|keep|stop|"
    r"no\s+need\s+to|use|prefer|let['\u2019]?s|let\s+us)\b",
    re.I,
)
_RULE = re.compile(
    r"(?i)^(?:(?:please|also|and|but|so|then|just)\b[,]?\s+)*"
    rf"(?:don{_APOSTROPHE}?t|do\s+not|never|always|avoid|must|only|stop|no\s+need\s+to|use|prefer)\b"
    rf"|\b(?:(?:I|we|you)\s+(?:don{_APOSTROPHE}?t|do\s+not)\s+(?:want|need|like)|never|"
    r"(?:call|name|spell)\s+(?:it|them|this|these)\b|spelling|"
    r"(?:use|commit|run|edit|write|touch|change|push)\s+only)\b|^(?:\S+\s+){0,4}only\s*[.!]?$"
)
"""A standing rule: a negative or an absolute, a naming or spelling rule, "X only"."""
_OBLIGATION = re.compile(
    rf"\b(?:must(?:n{_APOSTROPHE}t|\s+not)?(?!\s+have\b)|(?:you|we|I)\s+should(?:n{_APOSTROPHE}t|\s+not)?|"
    r"should\s+(?:never|always|not)|(?-i:not\s+(?:acceptable|accepable|allowed|valid))|"
    r"(?:it|this)\s+is\s+important|important\s+(?:not\s+)?to)\b",
    re.I,
)
"""A user's constraint ("don't commit until the end", "it must not block") the agent must keep."""
_PLAIN_REQUEST = re.compile(
    r"(?i)^(?:(?:please|also|and|but|so|then|just|now|ok(?:ay)?)\b[,]?\s+)*"
    r"(?:add|change|create|make|move|put|remove|rename|replace|rewrite|store|track|write|keep|"
    r"split|merge|extend|drop|delete|return|show|hide|set|switch|update|implement|build)\b"
)
"""A request in the imperative: with its reason it is a decision the person made."""
_OBSERVATION = re.compile(
    r"(?i)^(?:I\s+see|I\s+notice|it\s+(?:seems|looks)|(?:this\s+|that\s+)?looks\s+like|seems|"
    r"interesting|hmm|oh|ah|good|great|perfect|the\s+(?:test|build|error|issue|problem)s?\b)"
)
"""An account of what the agent found, not what it chose."""
_CHOICE_VERB = re.compile(
    rf"(?i)\b(?:(?:I|we)(?:{_APOSTROPHE}ll|\s+will|{_APOSTROPHE}m\s+going\s+to|\s+am\s+going\s+to|"
    rf"{_APOSTROPHE}re\s+going\s+to|\s+are\s+going\s+to)|let\s+me|let{_APOSTROPHE}s|let\s+us)"
    r"\s+(?:(?:also|now|just|first|then|instead)\s+)?(?P<verb>[a-z]+)"
)
"""The agent saying what it will do: the verb it will do it with."""
_LEADING_CONTRAST = re.compile(
    r"(?i)^(?:rather\s+than|instead\s+of)\b[^,]{1,160},\s*(?:I(?:'ll|\s+will)\s+|let\s+me\s+|"
    r"let's\s+|we(?:'ll|\s+will)\s+)?(?P<verb>[a-z]+)"
)
""""Rather than X, (let me) do Y": a choice, by its shape."""
_NOT_A_VERB = frozenset(split_words("it its they this that these those there he she the a an"))
"""What follows "Instead of X," when the sentence describes something ("it processes
every session"), not a choice."""
_PREFERRED = re.compile(
    rf"(?i)^(?:(?:actually|so|ok(?:ay)?|hmm|but|then)\b[,]?\s+)*(?:I\s+think\s+)?"
    rf"(?:it{_APOSTROPHE}?s|it\s+is|it\s+would\s+be)\s+"
    r"(?:much\s+|far\s+)?(?:cleaner|simpler|better|safer|best|cleanest|simplest)\s+to\s+"
    r"(?:just\s+)?(?P<verb>[a-z]+)"
    r"|^(?:(?:actually|so|ok(?:ay)?|hmm|but|then)\b[,]?\s+)*(?:the|a)\s+(?:cleanest|simplest|right|"
    r"best|better|safest|cleaner|simpler|safer)\s+(?:approach|solution|fix|way|option|design)\s+"
    r"(?:is|would\s+be|here\s+is)\s+(?:to\s+)?(?:just\s+)?(?P<verb2>[a-z]+)"
)
"""The agent naming the way it prefers ("I think it's cleaner to keep them separate",
"the right approach is to track the last synced id"): a choice it will act on."""
_DONE_CHOICE = re.compile(
    r"(?i)\b(?:I|we)\s+(?:chose|decided|went\s+with|opted|used|kept|replaced|switched|moved|"
    r"added|made|changed|extracted|implemented|put|wrote|split|stored|left)\b"
)
"""The agent reporting a choice it carried out ("I used X instead of Y because Z")."""
_AGENT_DECIDED = re.compile(
    rf"(?i)\b(?:I|we)(?:{_APOSTROPHE}ve|{_APOSTROPHE}d|\s+have)?\s+(?:decided|chose|chosen|opted|"
    r"settled\s+on|went\s+with|(?:am|are|'m|'re)\s+going\s+with|prefer(?:red)?|"
    r"switched\s+to|stuck\s+with)\b"
)
"""The agent saying it chose, in the first person ("If you prefer, ..." is not a choice)."""
_NOW_DOES = re.compile(r"(?i)\bnow\s+(?:[a-z]{3,}s|use|read|write|keep|store|call|return)\b")
"""A report of what the changed code does now ("the fallback now marks entries ...")."""


def words_pattern(*alternatives: str) -> re.Pattern[str]:
    """Any of ``alternatives`` (regular expressions) as whole words, in any case."""
    return re.compile(r"(?i)\b(?:" + "|".join(alternatives) + r")\b")


# Evidence that a later statement replaces an earlier one or builds on it (``supersedes``):
# it says it replaces; it ends what the earlier one put off ("start with X, we will add Y
# later" -> "now let's do Y"); it adds ("it should also stay on") or points back at the
# earlier one's subject ("make this highlight stay on").
REPLACES = words_pattern(
    "instead", r"rather\s+than", r"go(?:ing)?\s+back", r"revert(?:ing)?", r"roll\s*back",
    r"no\s+longer", r"not\s+anymore", r"the\s+other\s+way", r"switch\s+back", "undo",
)  # fmt: skip
_DEFERS = words_pattern(
    "later", r"for\s+now", r"at\s+first", r"to\s+start", r"start\s+with", "first"
)
_NOW = words_pattern("now", r"go\s+forward", "next")
_ADDS = words_pattern("also", r"as\s+well", "too", "still", r"in\s+addition", "stays?")
_POINTS_BACK = re.compile(r"(?i)\b(?:this|that|these|those|the\s+same)\s+(\w+)")
RESTATED_TOPIC = 3
"""Distinctive words a later statement shares with an earlier one when it restates the
same thing with another value ("a red highlight on the king in check" -> "a red overlay
on the king in check")..."""
RESTATED_SHARE = 0.6
"""...or this share of the shorter one's (the rest is the new value)."""


ANSWERS = re.compile(r"(?i)^\W*(?:1|a)\s*[:.)]\s")
"""A reply to the agent's numbered questions ("1: the premove auto-executes ... 2: ..."):
it details what was asked, it replaces nothing."""


def supersedes(earlier: str, mine: set[str], later: str, said: set[str]) -> bool:
    """Whether ``later`` (its subject words ``said``) replaces ``earlier`` (its distinctive
    subject words ``mine``), on evidence rather than topic overlap: it says so (``REPLACES``),
    it ends what the earlier put off, or it restates the same subject with another value and
    neither refers back to nor adds to it."""
    shared = len(mine & said)
    if shared < SHARED_TOPIC or ANSWERS.match(later):
        return False
    if REPLACES.search(later) or (_DEFERS.search(earlier) and _NOW.search(later)):
        return True
    same = shared >= RESTATED_TOPIC or shared >= RESTATED_SHARE * min(len(mine), len(said))
    back = any(_singular(w.lower()) in mine for w in _POINTS_BACK.findall(later))
    return same and not back and not _ADDS.search(later)


REPLACING_MESSAGE_WORDS = 200
"""A message longer than this (pasted output, a template) replaces no earlier choice."""
_FILLER_WORDS = frozenset(
    split_words(
        "instead rather other make sure currently want still could would please change keep "
        "using used lets thing things something really again first last"
    )
)


_CHUNK = re.compile(r"`[^`\n]{1,200}`|\S+")
_NAMED = re.compile(r"\w[\w-]*(?:[./_][\w-]+)+")
"""A file name or an identifier (``export_development_history.py``): one subject, however many
words it is made of."""
SENTENCE_MAX_CHARS = 2_000
"""A "sentence" longer than this is a pasted blob: no decision, and read no further."""


def subject_words(text: str) -> set[str]:
    """The words that say what a statement is about (``verdicts.topic_words`` without the
    words every request uses); a file name or an identifier counts as one."""
    names: set[str] = set()
    rest: list[str] = []
    for chunk in _CHUNK.findall(text[:SENTENCE_MAX_CHARS]):
        name = _NAMED.fullmatch(chunk.strip("`.,;:!?()[]{}\"'"))
        if name is not None:
            names.add(name.group().lower())
        else:
            rest.append(chunk)
    plain = {_singular(w) for w in topic_words(" ".join(rest))} - _FILLER_WORDS
    return plain | names


def common_words(topics: Sequence[set[str]]) -> set[str]:
    """The words in more than ``COMMON_SHARE`` of ``topics`` (and more than ``COMMON_MIN``):
    the run's subject ("piece", "cooldown"), which tells no statement from another."""
    counts = Counter(w for said in topics for w in said)
    limit = max(COMMON_MIN, COMMON_SHARE * len(topics))
    return {w for w, n in counts.items() if n > limit}


def _singular(word: str) -> str:
    """``pieces`` and ``piece`` are one subject."""
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def asks_for_change(sentence: str) -> bool:
    """A statement of the person that sets how something should be: a rule, a choice or a
    request in the imperative."""
    text = sentence.strip()
    if text.endswith("?"):
        return False
    return user_strength(text) > 0 or _PLAIN_REQUEST.match(text) is not None


_YOUR_CHOICE = re.compile(
    r"(?i)\b(?:if|whichever|which(?:\s+\w+)?)\s+you\s+(?:prefer|choose|decide)"
)
"""A choice the speaker leaves to the other: no decision yet."""
_SO_THAT_REQUEST = re.compile(r"(?i)\bmake\s+(?:it|this|that|sure)\s+so(?:\s+that)?\b")
""""Make it so that X" asks for X; its "so that" gives no reason."""
_CHOOSING_VERBS = frozenset(split_words("use adopt switch stick pick choose prefer go keep"))
""""I'll use X because Y" chooses; "let me remove X since we no longer need it" explains a
step (it is a choice only when it sets one option against another)."""
_PROCESS_VERBS = frozenset(split_words("enter exit begin continue proceed wait stop"))
"""What the agent will do next with its own session (enter plan mode, continue): no choice
about the work."""


_PASTED = re.compile(
    r"^\S*[/\\]\S*?[:(]\d+|\b(?:warning|error)\s+[A-Z]{2,}\d{2,}\b|^\S+:\d+:\d+:|"
    r"(?i:\b(?:warning|error|info|debug)\b)\s*[:\]]\s"
)
"""A line of a log or a compiler's output the person pasted ("Program.cs(41,14): warning
ASP0011: Suggest using X instead of Y"): its words are the tool's, not a choice."""


_COSMETIC = re.compile(
    r"(?i)\b(?:colou?rs?|bigger|larger|smaller|slightly|diameter|radius|font|pixels?|px|"
    r"margins?|padding|borders?|opacity|shadows?|(?:counter-?)?clockwise|thicker|thinner|"
    r"darker|lighter|highlight)\b"
)
"""A look's tweak ("make the circle slightly larger", "clockwise instead"): a choice, but
worth less than a rule of what the product does."""
COSMETIC_FACTOR = 0.5

_RULE_CHANGE = re.compile(r"(?i)\b(?:change|set|update|make)\s+the\s+rules?\b")
""""Change the rule such that the game is lost when the king is captured": the person
setting what the product does."""
_CONDITION_RULE = re.compile(
    r"(?i)^(?:\d+\s*[:.)]\s*)?(?:when|whenever|if|once|while|as\s+long\s+as)\s+"
    r"(?!(?:it|this|that|they|these|those)\b)[^,?]{3,160},"
    r"\s*(?:then\s+)?\S"
)
""""When a king is under check, that player can still move other pieces", "If a piece is on
cooldown, moving it queues a pre-move": a condition and what then happens, a product rule."""
_SPEAKER = re.compile(r"\b(?:I|me|my|(?i:we|us|our|you|your))\b")
"""A condition about the speaker or the agent ("if i try to drag", "when you run it") tells
what happened to someone, not what the product does."""
_SYMPTOM = re.compile(
    r"(?i)\b(?:nothing|doesn['\u2019]?t|does\s+not|didn['\u2019]?t|isn['\u2019]?t|won['\u2019]?t|"
    r"not\s+working|broken|crash\w*|errors?|fails?|failed|wrong|bug|seems?|looks\s+like|"
    r"still\s+getting)\b"
)
"""A report of a fault in the conditional's shape ("when it loads, nothing happens")."""


def states_product_rule(sentence: str) -> bool:
    """The person setting how the product behaves (a rule of a game, what happens when), which
    outranks a request about its look."""
    text = sentence.strip()
    if _RULE_CHANGE.search(text):
        return True
    return bool(
        _CONDITION_RULE.match(text) and not _SPEAKER.search(text) and not _SYMPTOM.search(text)
    )


_CLAUSE_END = re.compile(r"(?<=[.;!])\s+(?=[a-z])")
"""Typed in lower case ("try again. but don't change X"), a sentence the splitter keeps whole
holds clauses: a rule in any of them is a rule."""


def user_strength(sentence: str) -> float:
    """How surely a sentence the person typed sets a rule or makes a choice (0: it does not);
    a cosmetic tweak counts for less (``_COSMETIC``)."""
    strength = max(_user_strength(c) for c in _CLAUSE_END.split(sentence.strip()) if c)
    return strength * COSMETIC_FACTOR if _COSMETIC.search(sentence) else strength


def _user_strength(sentence: str) -> float:
    if len(sentence) > SENTENCE_MAX_CHARS or sentence.rstrip().endswith("?"):
        return 0.0
    if _PASTED.search(sentence):
        return 0.0
    if GO_AHEAD.match(sentence) and words(sentence) <= GO_AHEAD_WORDS:
        return 0.0  # "Let's implement it": a go-ahead; what it approves is the decision
    if _YOUR_CHOICE.search(sentence):
        return 0.0  # "If you prefer X, ...", "tell me which you prefer": a choice left open
    if DECISION.search(sentence) or CONTRAST.search(sentence):
        return USER_DECISION_FACTOR
    if _RULE.search(sentence) or _OBLIGATION.search(sentence) or states_product_rule(sentence):
        return USER_DECISION_FACTOR
    request = _IMPERATIVE.match(sentence) or _PLAIN_REQUEST.match(sentence)
    if request and RATIONALE.search(_SO_THAT_REQUEST.sub(" ", sentence)):
        return 1.0
    return REQUEST_FACTOR if _IMPERATIVE.match(sentence) else 0.0


_NOT_ACTING = frozenset(split_words("read understand see say tell ask know think wait check look"))
"""Verbs after "it's simpler to" that describe, not act ("it's simpler to read")."""


def _acts(preferred: re.Match[str]) -> bool:
    verb = preferred.group("verb") or preferred.group("verb2") or ""
    return verb.lower() not in _NOT_ACTING


def agent_strength(sentence: str) -> tuple[float, bool]:
    """How surely a sentence of the agent records a choice with its reason (0: it does not),
    and whether it still waits for the action that carries it out.

    A choice announced ("Rather than X, let me add Y", "I'll use X because Y")
    is a decision once the agent acts on it (a call that changes a file or
    runs a command, in this message or later in the same turn); one reported
    as done ("I used X instead of Y because Z", "the fallback now marks
    entries as user-only, since ...") stands by itself.
    """
    text = sentence.strip()
    if not text or len(text) > SENTENCE_MAX_CHARS or text.endswith("?"):
        return 0.0, False
    if _OBSERVATION.match(text):
        return 0.0, False
    reasoned = RATIONALE.search(text) is not None
    contrast = CONTRAST.search(text) is not None
    decided = _AGENT_DECIDED.search(text) is not None
    preferred = _PREFERRED.match(text)
    if not (reasoned or contrast or decided or preferred):
        return 0.0, False
    if _CHORE.match(NOTE_LEAD.sub("", text, count=1)):
        return 0.0, False  # "Also need to update X since it references Y": a step, not a choice
    if preferred is not None and _acts(preferred) and not text.endswith(":"):
        return 1.0, True
    lead = _LEADING_CONTRAST.match(text)
    if lead is not None and lead.group("verb").lower() in _NOT_A_VERB:
        lead = None
    future = _CHOICE_VERB.search(text)
    verb = lead.group("verb") if lead else future.group("verb") if future else None
    if verb is not None:
        if LOOKING.match(verb) or verb in ("need", "have", "should", "can", *_PROCESS_VERBS):
            return 0.0, False
        if lead is not None or decided or (reasoned and verb in _CHOOSING_VERBS):
            return 1.0, True
        return (CONTRAST_FACTOR, True) if contrast else (0.0, False)
    if decided:
        return 1.0, False
    if _DONE_CHOICE.search(text) and (reasoned or contrast):
        return (1.0 if reasoned else CONTRAST_FACTOR), False
    if _NOW_DOES.search(text) and reasoned:
        return RATIONALE_FACTOR * 1.5, False
    return 0.0, False


BUILT = "Built"
"""How a line of what the agent reported it built begins (``reports.py``)."""
SETTLED = "Settled"
"""How a design the agent restated on accepting the person's correction begins: a verdict."""
_VERDICT_PREFIXES = ("User", "Approved plan", SETTLED)


def is_narration(text: str) -> bool:
    """The agent telling its next move ("Now let me also remove X since we no longer need
    it:"), which no reader should take for a decision."""
    stripped = text.strip().lstrip("-*+\u2022 ").replace("**", "")
    if stripped.startswith(_VERDICT_PREFIXES):
        return False  # the person's word, or a plan they approved
    narrates = NARRATION.match(stripped) is not None or stripped.endswith(":")
    return narrates and agent_strength(stripped)[0] == 0.0


def states_decision(bullet: str) -> bool:
    """A Key Decisions bullet carried from an earlier snapshot that still reads as one: the
    person's, a verdict, or a choice with its reason. Another summarizer's "Errors and fixes"
    lines ("Stash was from before these changes") are an account, not a decision."""
    text = bullet.strip().replace("**", "")
    if text.startswith((*_VERDICT_PREFIXES, BUILT)) or _FIX_WITH_MEANS.match(text):
        return True
    return bool(RATIONALE.search(text) or CONTRAST.search(text) or DECISION.search(text))


_FIX_WITH_MEANS = re.compile(
    r"(?i)^(?:fixed|resolved|solved|worked around)\b.{3,200}?\bby\s+\w+ing\b"
)
"""How an error was fixed ("Fixed the import cycle by moving the helper to agent.go"): the
choice that made it go away, which stays true after the failure itself is settled."""


_PLAN_REASON = re.compile(
    r"(?i)^(?:strategy|approach|decision|design)\s*:\s*\S|"
    r"^(?:keep|use|add|leave|store|split|reuse|extend|move)\b[^()]{3,120}\([^()]{8,80}\)"
)
"""A plan's line of strategy ("Strategy: parallel enriched path"), or a step with its reason
in parentheses ("Keep `render/1` unchanged (backward compat for direct callers)")."""


def plan_lines(plan: str) -> list[str]:
    """The reasoned lines of a plan the person approved: each is a choice they agreed to."""
    out: list[str] = []
    for line in plan.splitlines():
        text = re.sub(r"^\s*(?:#{1,6}\s+|[-*+\u2022]\s+|\d+[.)]\s+)", "", line).strip()
        text = text.replace("**", "")
        if words(text) < 4 or text.startswith("|"):
            continue
        reasoned = RATIONALE.search(text) or CONTRAST.search(text) or _PLAN_REASON.search(text)
        if reasoned and not text.endswith("?"):
            out.append(clip_words(text.rstrip(":").rstrip(), 30))
        if len(out) >= MAX_PLAN_DECISIONS:
            break
    return out


def turns_approach_down(said: str) -> bool:
    """Whether the words typed turning a call down reject its approach ("We don't want
    if-else call site logic", "no, use the interface") rather than only ask about it."""
    if rejects(said) or redirects(said):
        return True
    statements = [s for s in re.split(r"(?<=[.!?])\s+", said.strip()) if not s.endswith("?")]
    return any(user_strength(s) >= USER_DECISION_FACTOR for s in statements)


_PERSON = re.compile(r"^User(?:\s*\([^)]*\))?:\s*")
"""A bullet in the person's words: ``User: ...`` or ``User (turning down X): ...``."""


def standing_rank(text: str) -> int:
    """0 for a standing rule of the person's ("never push", "don't fake OAuth", what they
    typed turning a call down), 1 for their other choices and verdicts, 2 for the agent's."""
    plain = text.strip().replace("**", "")
    m = _PERSON.match(plain)
    if m is None:
        return 1 if plain.startswith(_VERDICT_PREFIXES) else 2
    if "(replaced:" in plain or "(corrected later" in plain or "(superseded later" in plain:
        return 1  # no longer standing as said
    turned_down = plain.startswith("User (")
    return 0 if turned_down or user_strength(plain[m.end() :]) >= USER_DECISION_FACTOR else 1


def standing_first(bullets: Sequence[B]) -> list[B]:
    """Key Decisions in the order a resumed agent needs them: the person's standing rules,
    then their other choices, then the agent's (each group in its own order)."""
    return sorted(bullets, key=lambda b: standing_rank(b.text))


_APPROACH_LEAD = re.compile(
    r"(?i)\b(?:(?:the\s+)?(?:key\s+)?changes\s+(?:needed|required|are)|(?:my|the)\s+"
    r"(?:approach|plan|strategy)|I['\u2019]ll\s+(?:create|update|change|implement|do|make|"
    r"add|build|write|rewrite|refactor|split|extract)\b[^.:]{0,80}|here['\u2019]s\s+what\s+"
    r"I['\u2019]ll\s+do|(?:the\s+)?steps?)\s*[^.:]{0,40}:\s*$"
)
"""The line that opens the agent's account of how it will do the work ("The changes
needed in the renderer:", "I'll create the files in order:")."""
_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*+\u2022])\s+(?P<text>\S.*)$")
APPROACH_WORDS = 36
"""An approach is stated in at most this many words: its first steps, not the whole plan
(a plan without its reasons is worth less than a decision with one)."""


def stated_approach(text: str) -> str | None:
    """``Approach: 1. X; 2. Y`` when the agent's message opens a list of at least two steps
    with a line saying this is how it will do the work; the caller makes it a decision once
    a call of the same turn changes something. None otherwise."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not _APPROACH_LEAD.search(line.replace("**", "")):
            continue
        steps: list[str] = []
        for after in lines[i + 1 :]:
            m = _STEP.match(after)
            if m is None:
                if after.strip():
                    break
                continue
            steps.append(m.group("text").replace("**", "").strip())
        if len(steps) >= 2:
            joined = "; ".join(f"{n}. {s}" for n, s in enumerate(steps, 1))
            return clip_words(f"Approach: {joined}", APPROACH_WORDS)
    return None


GIST_WORDS = 8
"""Two statements opening with the same this-many words are one statement said twice (a
message sent again, a line broken differently)."""


def _gist(key: str) -> str:
    return " ".join(key.removeprefix("user ").split()[:GIST_WORDS])


@dataclass(slots=True)
class Decision:
    """One decision as said, by whom, in which of the person's turns."""

    text: str
    score: float
    user: bool
    turn: int
    topics: set[str]
    replaced_by: str | None = None

    def bullet(self) -> tuple[str, float]:
        if self.replaced_by is None:
            return self.text, self.score
        return f"{self.text} (replaced: {self.replaced_by})", self.score * REPLACED_FACTOR


@dataclass(slots=True)
class DecisionBook:
    """The decisions of one pass over the messages, and what later turns did to them."""

    items: dict[str, Decision] = field(default_factory=dict)
    turn: int = 0
    statements: list[tuple[int, str, set[str]]] = field(default_factory=list)
    """The person's statements, by turn, for telling which choices a later one replaced."""
    turn_words: list[set[str]] = field(default_factory=list)
    heard: set[str] = field(default_factory=set)
    gists: dict[str, str] = field(default_factory=dict)
    """The opening words of each decision -> its key: a decision said twice is one."""
    """Every statement of the person so far, for telling a quote from a new statement."""

    @staticmethod
    def key(text: str) -> str:
        return re.sub(r"[^\w/.:-]+", " ", text.lower()).strip()

    def add(self, text: str, score: float, *, user: bool, topics: set[str] | None = None) -> str:
        key = self.key(text)
        key = self.gists.setdefault(_gist(key), key)
        old = self.items.get(key)
        if key and old is None:
            self.items[key] = Decision(text, score, user, self.turn, topics or set())
        elif old is not None:  # said again (or quoted back): the first time is when it was made
            old.score = max(old.score, score)
        return key

    def request(self, sentences: list[str]) -> None:
        """A new turn of the person: the requests and rules in it may replace earlier
        choices (a long message, a pasted log or template, replaces nothing)."""
        self.turn += 1
        said: set[str] = set()
        short = sum(words(s) for s in sentences) <= REPLACING_MESSAGE_WORDS
        for sentence in sentences:
            topics = subject_words(sentence)
            said |= topics
            key = _gist(self.key(sentence))
            if key in self.heard:
                continue  # quoted back (a pasted log, a reminder): said before, not anew
            self.heard.add(key)
            if short and words(sentence) >= 3 and asks_for_change(sentence):
                self.statements.append((self.turn, sentence, topics))
        self.turn_words.append(said)

    def void(self, keys: list[str]) -> None:
        for key in keys:
            self.items.pop(key, None)

    def mark(self, key: str, note: str) -> None:
        """Mark one decision (``(corrected later: what said so)``, ``(superseded later:
        ...)``) at half weight."""
        d = self.items.pop(key, None)
        if d is not None:
            self.add(f"{d.text} ({note})", d.score * REPLACED_FACTOR, user=d.user, topics=d.topics)

    def replaced_by(self, topics: set[str], turn: int, key: str) -> str | None:
        """The first later statement of the person on the same subject as a choice, if any."""
        common = common_words(self.turn_words)
        mine = topics - common
        if len(mine) < SHARED_TOPIC:
            return None
        for later_turn, sentence, said in self.statements:
            if later_turn <= turn or _gist(self.key(sentence)) == _gist(key):
                continue  # not later, or the same statement said again
            if supersedes(key, mine, sentence, said):
                return clip_words(sentence, REPLACING_WORDS)
        return None

    def ranked(self) -> dict[str, tuple[str, float]]:
        """Normalised text -> (bullet, score); a user's replaced choice says what replaced it."""
        out: dict[str, tuple[str, float]] = {}
        for key, d in self.items.items():
            if d.user and d.replaced_by is None:
                d.replaced_by = self.replaced_by(d.topics, d.turn, key)
            out[key] = d.bullet()
        return out

    def carried(self, text: str) -> str:
        """A user decision carried from the previous snapshot, marked when this window's
        statements replaced it."""
        if not text.startswith("User:") or "(replaced:" in text:
            return text
        by = self.replaced_by(subject_words(text[5:]), 0, self.key(text))
        return f"{text} (replaced: {by})" if by else text


__all__ = [
    "ANSWERS",
    "CONTRAST",
    "DECISION",
    "NARRATION",
    "NOTE_LEAD",
    "RATIONALE",
    "REPLACES",
    "SHARED_TOPIC",
    "USER_DECISION_FACTOR",
    "Decision",
    "DecisionBook",
    "agent_strength",
    "asks_for_change",
    "common_words",
    "is_narration",
    "plan_lines",
    "standing_first",
    "standing_rank",
    "stated_approach",
    "states_decision",
    "states_product_rule",
    "subject_words",
    "supersedes",
    "turns_approach_down",
    "user_strength",
    "words_pattern",
]
