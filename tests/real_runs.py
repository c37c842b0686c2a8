"""The real transcripts beside the project, listed and imported as a user imports them."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TRANSCRIPTS
from threadline.interop.sync import Syncer, find_sources
from threadline.store.base import Session, Store


def transcript_files() -> list[str]:
    """Every transcript file under ``../shared/transcripts``, relative to it ([] without it)."""
    return sorted(
        str(p.relative_to(TRANSCRIPTS))
        for p in (TRANSCRIPTS.rglob("*") if TRANSCRIPTS.is_dir() else [])
        if p.is_file() and p.name != "README.md"
    )


def import_into(store: Store, path: Path) -> list[Session]:
    """The sessions ``threadline sessions import PATH`` makes of one file (imported
    compactions included, as checkpoints); [] when this build cannot import it."""
    report = Syncer(store).sync(find_sources([str(path)]))
    return [store.get_session(r.session_id) for r in report.results if r.session_id]
