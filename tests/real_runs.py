"""The real transcripts beside the project, listed and imported as a user imports them."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TRANSCRIPTS
from threadline.interop.sync import Syncer, find_sources
from threadline.store.protocol import Session, Store


def transcript_files() -> list[str]:
    """Every source under ``../shared/transcripts`` as ``sessions import`` of the
    directory finds it (an OpenHands V1 conversation directory once, not per event file),
    relative to it ([] without it)."""
    if not TRANSCRIPTS.is_dir():
        return []
    found = find_sources([str(TRANSCRIPTS)])
    return sorted(str(s.path.relative_to(TRANSCRIPTS)) for s in found if s.path is not None)


def import_into(store: Store, path: Path) -> list[Session]:
    """The sessions ``threadline sessions import PATH`` makes of one file (imported
    compactions included, as checkpoints); [] when this build cannot import it."""
    report = Syncer(store).sync(find_sources([str(path)]))
    return [store.get_session(r.session_id) for r in report.results if r.session_id]
