"""Aider chat history (``.aider.chat.history.md``) as threadline messages.

Schema read (aider ``aider/io.py``: ``user_input``, ``ai_output``,
``append_chat_history``; every edit format of ``aider/coders``):

- ``# aider chat started at <local time>`` opens a session (several a file); the
  time is kept as ``aider_session_started`` on its first message.
- User input: every line prefixed ``#### `` (a blank input line is ``####``). Aider
  ends each with two spaces (a Markdown line break); when a session keeps that
  convention (older versions, or an editor, may not), a ``####`` line without them
  is the model's own Markdown heading (``#### 1. Define the data``), part of its
  reply.
- Aider's own output (``tool_output``, ``tool_error``, ``tool_warning``, confirmations:
  token reports, ``Applied edit to <file>``, ``Commit <sha> ...``, ``Create new
  file? ... y``, edit-format errors): a line starting ``> `` (or ``>`` alone), ending
  with two spaces. A multi-line message has ``> `` on its first line only and runs
  to the first line with text that ends with two spaces. Each is kept whole, ``> `` removed,
  in ``metadata["aider_notes"]`` of the message it follows (before any message of a
  session: of the next one). Nothing here is a tool call: aider sends no structured
  calls, and the applied edits are what these notes and the reply's edit blocks say.
- The reply: every other line, as ONE assistant message, verbatim. Its edit blocks
  stay intact whatever the edit format: SEARCH/REPLACE (``<<<<<<< SEARCH``,
  ``=======``, ``>>>>>>> REPLACE``: a line of ``>`` characters is never a note),
  whole-file (a file name, then a fenced block), unified diff (fenced ``diff`` with
  ``---`` / ``+++`` / ``@@`` lines), architect and editor replies alike. Inside a
  fenced block nothing is read as a note or as user input, unless it ends the way
  aider's own lines do (a bare ``>`` too: aider's blank note line) or is the usage
  report (``> Tokens: ...``) that follows every reply: a reply cut short leaves its
  fence open, and is marked ``metadata["aider_cut_short"]``; its last edit block
  stops where the model stopped, with none of aider's lines in it. A reply that follows
  aider's notes with no user input between them (aider sent its edit error back to
  the model, a "reflection") is a reply of its own.

Left out: nothing but blank lines; notes before the first message of a file are
counted as ``aider_notes_without_message`` when no message follows them.
"""

from __future__ import annotations

import re
from pathlib import Path

from threadline.interop.records import Parsed
from threadline.messages import Message

STARTED = "# aider chat started at"
USER = "####"
_NOTE = re.compile(r"^>(?: |$)")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
USAGE = "> Tokens:"
"""Aider's usage report, written after every reply."""
BREAK = "  "
"""Aider ends every line it writes itself (user input, its notes) with this."""


def keeps_line_breaks(lines: list[str]) -> bool:
    """Whether the file kept aider's two trailing spaces (an editor may strip them)."""
    users = [line for line in lines if line.startswith(USER)]
    return bool(users) and sum(line.endswith(BREAK) for line in users) * 2 > len(users)


class _Reader:
    def __init__(self, breaks: bool) -> None:
        self.breaks = breaks
        self.result = Parsed([[]])
        self.out = self.result.runs[0]
        self.user: list[str] = []
        self.reply: list[str] = []
        self.fence: str | None = None  # the open fence of the reply, if any
        self.notes: list[str] = []  # notes before any message of this session
        self.note: list[str] | None = None  # a multi-line note still being read
        self.started: str | None = None

    # -- writing messages

    def _emit(self, m: Message) -> None:
        if self.started:
            m.metadata["aider_session_started"] = self.started
        if self.notes:
            m.metadata["aider_notes"] = self.notes
        self.out.append(m)
        self.started, self.notes = None, []

    def flush(self) -> None:
        if self.user:
            self._emit(Message.user("\n".join(self.user).rstrip()))
        body = "\n".join(self.reply).strip()
        if body:
            reply = Message.assistant(body)
            if self.fence is not None:  # the output limit or an interrupt cut it
                reply.metadata["aider_cut_short"] = True
            self._emit(reply)
        self.user, self.reply, self.fence = [], [], None

    def _add_note(self, text: str) -> None:
        target = (
            self.out[-1].metadata.setdefault("aider_notes", [])
            if self.out and not self.started
            else self.notes
        )
        target.append(text)

    # -- reading lines

    def line(self, raw: str) -> None:
        if self.note is not None:  # the rest of a multi-line note
            self.note.append(raw.rstrip())
            if raw.endswith(BREAK) and raw.strip():
                self._add_note("\n".join(self.note).strip())
                self.note = None
            return
        if self.fence is not None and not self._ends_reply(raw):
            self.reply.append(raw.rstrip())
            if _closes(raw, self.fence):
                self.fence = None
            return
        if raw.startswith(STARTED):
            self.flush()
            self.started = raw.removeprefix(STARTED).strip()
            self.result.info.setdefault("started", self.started)  # local time, as written
        elif raw.startswith(USER) and self._is_user(raw):
            if self.reply:
                self.flush()
            self.user.append(raw[5:].rstrip() if raw.startswith(USER + " ") else "")
        elif _NOTE.match(raw) and self._is_note(raw):
            self.flush()  # a reply ends where aider's own output starts
            text = raw[1:].strip()
            if self.breaks and not raw.endswith(BREAK):
                self.note = [text]
            else:
                self._add_note(text)
        else:
            if self.user:
                self.flush()
            self.reply.append(raw.rstrip())
            opened = _FENCE.match(raw)
            if opened:
                self.fence = opened.group(1)

    def _ends_reply(self, raw: str) -> bool:
        """Inside a fenced block, only aider's own lines end the reply: a reply cut short
        (the output limit, an interrupt) leaves its fence open."""
        if raw.startswith(USAGE):
            return True
        mine = raw.startswith(USER) or _NOTE.match(raw) is not None
        return self.breaks and mine and raw.endswith(BREAK)

    def _is_user(self, raw: str) -> bool:
        return not self.breaks or raw.endswith(BREAK) or raw.strip() == USER

    def _is_note(self, raw: str) -> bool:
        """A ``> `` line in the middle of a reply is the model's quote unless it ends the
        way aider's notes do."""
        return not (self.reply and self.breaks and not raw.endswith(BREAK))

    def finish(self) -> Parsed:
        if self.note is not None:
            self._add_note("\n".join(self.note).strip())
        self.flush()
        if self.notes:
            self.result.skipped["aider_notes_without_message"] += len(self.notes)
        self.result.info["notes"] = sum(len(m.metadata.get("aider_notes", [])) for m in self.out)
        return self.result


def _closes(raw: str, fence: str) -> bool:
    stripped = raw.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _sessions(lines: list[str]) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    for raw in lines:
        if raw.startswith(STARTED) and chunks[-1]:
            chunks.append([])
        chunks[-1].append(raw)
    return chunks


def parse(text: str, path: Path) -> Parsed:
    """Every session of the file as one conversation (aider resumes its history)."""
    reader = _Reader(breaks=False)
    for chunk in _sessions(text.splitlines()):  # each aider version writes its own way
        reader.breaks = keeps_line_breaks(chunk)
        for raw in chunk:
            reader.line(raw)
    return reader.finish()
