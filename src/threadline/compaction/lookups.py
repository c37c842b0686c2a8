"""Shell commands that only look: what they name is where the agent looked, not a value.

A path or URL a command used is worth carrying over when the command changed something
(``mkdir -p assets/pieces``, ``curl -o``, ``git rm``, a test run writing its results): the
next agent may need to do it again or undo it. One that only listed, searched or printed
(``find . -not -path './.git/*'``, ``rg --glob '!CHANGELOG.md'``, ``git status``) named
places to look, and what it found is in its output. ``only_looks`` tells them apart by the
programs each simple command runs.
"""

from __future__ import annotations

import re

from threadline.compaction.toolcalls import simple_commands
from threadline.compaction.values import split_words

LOOKERS = frozenset(
    split_words(
        "cat head tail less more grep egrep fgrep rg ag ack ls find fd tree wc stat file du df "
        "echo printf pwd which whereis type command jq yq sort uniq cut tr column nl diff cmp "
        "comm basename dirname realpath readlink date env printenv ps id whoami uname hostname "
        "sleep true false test [ cd pushd popd awk"
    )
)
"""Programs that print what they find and change nothing (``sed`` without ``-i`` too)."""
GIT_LOOKS = frozenset(
    split_words("status diff log show branch rev-parse ls-files grep blame describe remote")
)
"""``git`` subcommands that only report."""


_XARGS_VALUED = frozenset(split_words("-n -I -P -L -d -s -E -a"))
"""Options of a prefix command (``xargs``, which ``simple_commands`` drops) that take a
value: the program it runs comes after them."""


def _looks(argv: list[str]) -> bool:
    if argv[0].startswith("-"):  # a prefix's options (``xargs -n1 sh -c ...``): what it runs
        rest = argv
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in _XARGS_VALUED else rest[1:]
        return not rest or _looks(rest)
    prog = argv[0].rsplit("/", 1)[-1]
    if prog in ("sh", "bash", "zsh") and "-c" in argv[1:-1]:
        return only_looks(argv[argv.index("-c") + 1])
    if prog == "sed":  # ``-i``, ``-Ei``, ``--in-place=.bak``: it edits
        return not any(_SED_IN_PLACE.match(a) for a in argv[1:])
    if prog == "find":  # ``-delete``, ``-exec rm``, ``-fprint``: it acts on what it finds
        return not any(a in _FIND_ACTS or a.startswith("-fprint") for a in argv[1:])
    if prog == "sort":  # ``-o out``: it writes
        return not any(a in ("-o", "--output") or a.startswith("--output=") for a in argv[1:])
    if prog == "git":
        rest = argv[1:]
        while rest[:1] and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("-C", "-c") else rest[1:]
        if rest[:1] in (["remote"], ["branch"]):  # ``remote add``, ``branch -D x``: a change
            return all(a in _LISTING for a in rest[1:])
        return bool(rest) and rest[0] in GIT_LOOKS
    return prog in LOOKERS


_SED_IN_PLACE = re.compile(r"^(?:-[^-]*i|--in-place)")
_FIND_ACTS = frozenset(split_words("-delete -exec -execdir -ok -okdir -fls"))
_LISTING = frozenset(split_words("-v -vv -a -r -l --list --all --verbose show get-url"))
"""What ``git remote`` / ``git branch`` take to list, not to change."""


def only_looks(command: str) -> bool:
    """Whether every simple command of a shell script only reads, lists or prints (and
    none writes a file through a redirection: ``simple_commands`` leaves those out, so a
    ``>`` in the script counts as a change)."""
    if ">" in command.replace("2>&1", "").replace(">/dev/null", "").replace("> /dev/null", ""):
        return False
    argvs = simple_commands(command)
    return bool(argvs) and all(_looks(argv) for argv in argvs)


__all__ = ["GIT_LOOKS", "LOOKERS", "only_looks"]
