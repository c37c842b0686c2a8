"""The demo's skill: a real skill folder shipped with threadline, loaded in the first turn.

``threadline demo`` shows skills at work without a network: the demo agent offers
the ``invoice-conventions`` skill (``demo/skills/``, a ``SKILL.md`` and a checklist
beside it), so its system prompt lists the skill, and the simulated model's first
step calls the real ``skill`` tool for it before touching the code. The result
is the skill's body, stored protected, so pruning never shrinks it, and the
compactions that follow name it among the skills in use.

Additive on purpose: ``with_skill_step`` returns a new scenario (the playback's
cached one is never changed), ``demo_skills`` the skill set the agent takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from threadline.agent.skills import SKILL_TOOL, SkillSet, discover_skills, render_skill
from threadline.demo.coding_run import Step, Turn
from threadline.messages import ToolCall

DEMO_SKILLS_DIR = Path(__file__).with_name("skills")
DEMO_SKILL = "invoice-conventions"
SKILL_CALL_ID = "call_demo_skill_0"
SKILL_STEP_TEXT = "First I load the service's invoice conventions skill."


def demo_skills() -> SkillSet:
    """The skills the demo agent offers: those shipped in ``demo/skills``."""
    return discover_skills(dirs=[DEMO_SKILLS_DIR])


def with_skill_step(scenario: Sequence[Turn], skills: SkillSet | None = None) -> list[Turn]:
    """``scenario`` with a first step in its first turn that loads ``DEMO_SKILL``."""
    turns = list(scenario)
    skill = (skills or demo_skills()).get(DEMO_SKILL)
    if not turns or skill is None:
        return turns
    call = ToolCall(id=SKILL_CALL_ID, name=SKILL_TOOL, arguments={"name": DEMO_SKILL})
    step = Step(text=SKILL_STEP_TEXT, calls=[call], results=[render_skill(skill)])
    turns[0] = dataclasses.replace(turns[0], steps=[step, *turns[0].steps])
    return turns


__all__ = ["DEMO_SKILL", "DEMO_SKILLS_DIR", "demo_skills", "with_skill_step"]
