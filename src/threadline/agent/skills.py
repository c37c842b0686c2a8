"""Skills: folders of instructions an agent loads when a task calls for them.

A skill is a folder holding a ``SKILL.md``: YAML front matter with its
``name`` and a one-line ``description``, then the instructions (the body)::

    ---
    name: release-notes
    description: Write release notes from the git log in the project's house style.
    ---
    1. Run `git log --oneline <last tag>..HEAD` ...

Files beside ``SKILL.md`` (templates, examples, scripts) belong to the skill.
Skills are found in the project's ``./.threadline/skills`` and then in the
user's ``<user config dir>/skills`` (``$THREADLINE_CONFIG_DIR/skills`` when
set; a project skill wins over a user skill of the same name), and an agent
file's ``skills:`` lists names from those folders or paths to skill folders
(``"*"`` standing for every skill found; without the field, every skill found
is offered). The system prompt lists each skill's name and description
(``prompt``, sorted by name so the cached prefix holds); the model loads one
with the ``skill`` tool, whose result is the body and which reads a file
inside the skill's folder on request, never one outside it, hidden (``.git/config``)
or hard-linked (a hard link may be any file of the disk). That result is
marked protected, so pruning never shrinks it (``context.pruning.is_protected``),
and named in its metadata, so a compaction keeps the names of the skills in use.

A bad ``SKILL.md`` is a ``SkillError`` naming the file, its front matter read
within bounds (``yaml_limits``: 50,000 nested brackets are an error, not a crash).
Discovery never raises for one: it is left out and listed in ``SkillSet.problems``,
which the agent logs and ``threadline context`` shows, so one broken folder cannot
stop an agent. So is a second folder claiming a name already taken in its skills
folder (the folder named after the skill is kept), never a silent replacement.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.agent.config import read_text_file, user_config_dir
from threadline.agent.tools import Tool, ToolError, ToolOutput, make_tool
from threadline.errors import SkillError
from threadline.messages import PROTECTED_RESULT_KEY, SKILL_KEY
from threadline.yaml_limits import load_yaml

SKILL_FILE = "SKILL.md"
SKILLS_DIRNAME = "skills"
PROJECT_SKILLS_DIR = Path(".threadline") / SKILLS_DIRNAME
"""Relative to the working directory."""
SKILL_TOOL = "skill"
ALL_SKILLS = "*"
"""In an agent file's ``skills:``, every skill found in the skills folders."""
MAX_SKILL_BYTES = 256 * 1024
MAX_SKILL_FILE_BYTES = 1024 * 1024
"""A file read from a skill's folder on request."""
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$")
"""Lower-case letters, digits, ``-`` and ``_`` (the Agent Skills convention)."""
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.S | re.M)


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name and description, and where its folder is."""

    name: str
    description: str
    folder: Path
    body: str
    """The instructions: ``SKILL.md`` after its front matter, stripped."""

    @property
    def file(self) -> Path:
        return self.folder / SKILL_FILE

    def files(self) -> list[str]:
        """Files beside ``SKILL.md``, relative to the folder, sorted (hidden ones, such as
        ``.git/``, are not the skill's)."""
        found = []
        root = self.folder.resolve()
        for path in sorted(self.folder.rglob("*")):
            if path.name == SKILL_FILE or _hidden(path, self.folder) or not path.is_file():
                continue
            real = path.resolve()
            if real.is_relative_to(root) and not _hidden(real, root) and _one_link(real):
                found.append(path.relative_to(self.folder).as_posix())
        return found

    def read(self, relative: str) -> str:
        """A file of the skill, as text: inside the folder once every link is followed, not
        hidden (no part of its path starting with ``.``: ``.git/config``, ``..``), and with
        no other hard link (which could be any file on the disk); anything else is refused
        with a ``SkillError``."""
        root = self.folder.resolve()
        try:
            target = (root / relative).resolve()
        except (OSError, RuntimeError) as exc:  # a symbolic link loop
            raise SkillError(f"skill {self.name!r}: cannot read {relative!r}: {exc}") from exc
        if (
            not relative.strip()
            or not target.is_relative_to(root)
            or target == root
            or _hidden(target, root)
            or any(part.startswith(".") for part in Path(relative).parts)
        ):
            raise SkillError(
                f"skill {self.name!r}: {relative!r} is not a file inside its folder "
                f"{self.folder} (nor is a hidden one read)"
            )
        if not target.is_file():
            known = ", ".join(self.files()) or "none"
            raise SkillError(f"skill {self.name!r} has no file {relative!r} (its files: {known})")
        return read_text_file(
            target,
            max_bytes=MAX_SKILL_FILE_BYTES,
            what="a skill file",
            error=SkillError,
            single_link=True,
        )


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _one_link(path: Path) -> bool:
    try:
        return path.stat().st_nlink == 1
    except OSError:
        return False


def parse_skill(text: str, *, source: str, folder: Path) -> Skill:
    """A ``SKILL.md``'s text as a ``Skill``; every problem a ``SkillError`` naming ``source``."""
    text = text.lstrip("\ufeff")
    m = _FRONT_MATTER.match(text)
    if m is None:
        raise SkillError(
            f"{source}: a SKILL.md must begin with YAML front matter between '---' lines "
            "holding its name and description"
        )
    meta = load_yaml(m.group(1), source=source, error=SkillError, first_line=2)
    if not isinstance(meta, dict):
        raise SkillError(f"{source}: the front matter must be a mapping with name and description")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise SkillError(f"{source}: the front matter needs a 'name' (a string)")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS or not NAME_PATTERN.match(name):
        raise SkillError(
            f"{source}: skill name {name!r} must be at most {MAX_NAME_CHARS} lower-case letters, "
            "digits, '-' or '_'"
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{source}: the front matter needs a 'description' (a string)")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(
            f"{source}: the description is {len(description):,} characters; "
            f"at most {MAX_DESCRIPTION_CHARS:,}"
        )
    body = text[m.end() :].strip()
    if not body:
        raise SkillError(f"{source}: the skill has no instructions after its front matter")
    return Skill(name=name, description=description, folder=folder, body=body)


def load_skill(folder: Path) -> Skill:
    """The skill in ``folder`` (or the folder of a ``SKILL.md`` path given directly)."""
    folder = folder.expanduser()
    if folder.name == SKILL_FILE:
        folder = folder.parent
    path = folder / SKILL_FILE
    if not path.is_file():
        raise SkillError(f"{path}: not found (a skill is a folder holding a {SKILL_FILE})")
    text = read_text_file(path, max_bytes=MAX_SKILL_BYTES, what=f"a {SKILL_FILE}", error=SkillError)
    return parse_skill(text, source=str(path), folder=folder)


def skill_dirs(cwd: Path | None = None) -> list[Path]:
    """Where skills are looked up, in order: ``./.threadline/skills``, then the user's."""
    return [(cwd or Path.cwd()) / PROJECT_SKILLS_DIR, user_config_dir() / SKILLS_DIRNAME]


@dataclass
class SkillSet:
    """The skills an agent offers, by name, and what could not be loaded."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """One line per skill left out: its file and what is wrong."""

    def __bool__(self) -> bool:
        return bool(self.skills)

    def __contains__(self, name: object) -> bool:
        return name in self.skills

    def get(self, name: str) -> Skill | None:
        return self.skills.get(name)

    def hints(self) -> list[tuple[str, str]]:
        """(name, description), sorted by name: the system prompt's stable order."""
        return sorted((s.name, s.description) for s in self.skills.values())

    def tool(self) -> Tool:
        """The ``skill`` tool over these skills."""
        return skill_tool(self)


def _found_in(dirs: Iterable[Path], problems: list[str]) -> dict[str, Skill]:
    found: dict[str, Skill] = {}
    for directory in dirs:
        if not directory.is_dir():
            continue
        here: dict[str, Skill] = {}
        for folder in sorted(directory.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            try:
                skill = load_skill(folder)
            except SkillError as exc:
                problems.append(str(exc))
                continue
            other = here.get(skill.name)
            if other is None:
                here[skill.name] = skill
                continue
            kept, left = _one_of_a_name(other, skill)
            here[skill.name] = kept
            problems.append(
                f"{left.file}: skill name {left.name!r} is also the name of {kept.file}; "
                "this one is left out (give each skill its own name)"
            )
        for name, skill in here.items():
            found.setdefault(name, skill)  # the project's wins over the user's
    return found


def _one_of_a_name(first: Skill, second: Skill) -> tuple[Skill, Skill]:
    """Two folders of one skills folder that claim one name: the one whose folder bears
    the name is kept (else the first by folder name), the other left out."""
    if second.folder.name == second.name and first.folder.name != first.name:
        return second, first
    return first, second


def discover_skills(
    wanted: Sequence[str] | None = None,
    *,
    dirs: Sequence[Path] | None = None,
    base: Path | None = None,
) -> SkillSet:
    """The skills of an agent: every skill in ``dirs`` (default ``skill_dirs()``) when
    ``wanted`` is None, else those it names (names from ``dirs``, paths to folders relative
    to ``base``, ``"*"`` for all found). Never raises for a bad skill: see ``problems``."""
    problems: list[str] = []
    found = _found_in(dirs if dirs is not None else skill_dirs(), problems)
    if wanted is None:
        return SkillSet(dict(sorted(found.items())), problems)
    chosen: dict[str, Skill] = {}
    for entry in wanted:
        if entry == ALL_SKILLS:
            for name, skill in found.items():
                chosen.setdefault(name, skill)
        elif _is_path(entry):
            path = Path(entry).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            try:
                skill = load_skill(path)
            except SkillError as exc:
                problems.append(str(exc))
                continue
            other = chosen.setdefault(skill.name, skill)
            if other.folder.resolve() != skill.folder.resolve():
                problems.append(
                    f"{skill.file}: skill name {skill.name!r} is also the name of "
                    f"{other.file}; this one is left out (give each skill its own name)"
                )
        elif entry in found:
            chosen.setdefault(entry, found[entry])
        else:
            looked = ", ".join(str(d) for d in (dirs if dirs is not None else skill_dirs()))
            problems.append(f"skill {entry!r} not found (looked in {looked})")
    return SkillSet(dict(sorted(chosen.items())), problems)


def _is_path(entry: str) -> bool:
    return "/" in entry or "\\" in entry or entry.startswith((".", "~"))


def render_skill(skill: Skill) -> str:
    """What the ``skill`` tool returns: the body, then the folder's other files if any."""
    files = skill.files()
    if not files:
        return skill.body
    listed = "\n".join(f"- {f}" for f in files)
    return (
        f"{skill.body}\n\n[files in this skill's folder; read one with "
        f'{SKILL_TOOL}(name="{skill.name}", file="...")]\n{listed}'
    )


def skill_tool(skills: SkillSet) -> Tool:
    """``skill(name, file=None)``: a skill's instructions, or one of its files."""

    def skill(name: str, file: str | None = None) -> Any:
        found = skills.get(name.strip())
        if found is None:
            known = ", ".join(sorted(skills.skills)) or "none"
            raise ToolError(f"no skill named {name!r} (skills: {known})")
        try:
            text = render_skill(found) if not file else found.read(file)
        except SkillError as exc:
            raise ToolError(str(exc)) from None
        meta: dict[str, Any] = {SKILL_KEY: found.name, PROTECTED_RESULT_KEY: True}
        if file:
            meta["skill_file"] = file
        return ToolOutput(text, meta)

    return make_tool(
        skill,
        name=SKILL_TOOL,
        description=(
            "Load a skill's instructions by name (the skills are listed in the system prompt) "
            "before doing the task it is for; with file, read a file from the skill's folder."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name."},
                "file": {
                    "type": "string",
                    "description": "Optional: a file inside the skill's folder to read.",
                },
            },
            "required": ["name"],
        },
    )


__all__ = [
    "ALL_SKILLS",
    "PROJECT_SKILLS_DIR",
    "SKILL_FILE",
    "SKILL_TOOL",
    "Skill",
    "SkillSet",
    "discover_skills",
    "load_skill",
    "parse_skill",
    "render_skill",
    "skill_dirs",
    "skill_tool",
]
