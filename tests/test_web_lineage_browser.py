"""The web session list folds subagents under their parent and shows each session's own
dates (issue 22, points 3-4), in headless Chromium like ``test_web_browser.py``.

The store holds an imported-looking February session with a subagent and a compaction
summary under it, an older session and one made today. The list shows the three
top-level ones, newest first by their own dates, the February one with "2 under it";
opening that fold shows the children, whose page names its parent (and back); a
search hit in the subagent says which session it is under.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests import test_web_browser
from tests.web_live import LiveServer, start
from threadline import Message, open_store
from threadline.cli.render import fmt_time
from threadline.store.encoding import dated

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")

chromium = test_web_browser.chromium  # its fixtures, over this module's own server
browser_page = test_web_browser.browser_page
FEB = datetime(2025, 2, 3, 4, 5, 6, tzinfo=UTC)
NOV = datetime(2024, 11, 20, 9, 0, tzinfo=UTC)
WORD = "okapistripes"


def seed_lineage(db: Path) -> dict[str, str]:
    store = open_store(f"sqlite://{db}")
    try:
        main = store.create_session(title="Main task", created_at=FEB, model="simulated/gpt-4o")
        main.append(dated([Message.user("fix the parser")], FEB + timedelta(hours=3)))
        sub = store.create_session(
            parent=main.id, created_at=FEB, title="Look for stripes", metadata={"agent_id": "a1"}
        )
        sub.append(dated([Message.user(f"where are the {WORD}?")], FEB + timedelta(hours=1)))
        summary = store.create_session(
            parent=main.id,
            created_at=FEB + timedelta(hours=2),
            title="Compaction summary of Main task",
            metadata={"child_kind": "compaction", "agent_id": "acompact-1"},
        )
        summary.append(dated([Message.user("summarise")], FEB + timedelta(hours=2)))
        solo = store.create_session(title="Older one", created_at=NOV)
        today = store.create_session(title="Made today")
        return {
            "main": main.id,
            "sub": sub.id,
            "summary": summary.id,
            "solo": solo.id,
            "today": today.id,
        }
    finally:
        store.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from start(tmp_path_factory.mktemp("lineage"), seed_lineage)


def test_the_list_folds_children_under_their_parent_by_own_dates(
    browser_page: Any, live: LiveServer
) -> None:
    page, ids = browser_page, live.ids
    page.goto(live.base + "/")
    rows = page.locator("tr.session-row")
    order = [rows.nth(i).get_attribute("data-session") for i in range(rows.count())]
    assert order == [ids["today"], ids["main"], ids["solo"]]  # top-level, by own dates
    main = page.locator(f'tr.session-row[data-session="{ids["main"]}"]')
    cells = main.locator("td").all_inner_texts()
    assert fmt_time(FEB) in cells and fmt_time(FEB + timedelta(hours=3)) in cells
    fold = main.locator("details.children")
    assert fold.locator("summary").inner_text() == "2 under it"
    kids = fold.locator("li.child")
    assert not kids.first.is_visible()  # folded until asked
    fold.locator("summary").click()
    assert [kids.nth(i).get_attribute("data-session") for i in range(2)] == [
        ids["summary"],
        ids["sub"],
    ]
    assert "compaction summary" in kids.nth(0).inner_text()
    assert "subagent" in kids.nth(1).inner_text()
    kids.nth(1).get_by_role("link", name="Look for stripes").click()
    page.wait_for_url(f"**/sessions/{ids['sub']}")
    head = page.locator(".session-head")
    assert "created " + fmt_time(FEB) in head.inner_text()
    lineage = head.locator("p.lineage")
    assert lineage.inner_text() == "subagent of Main task"
    lineage.get_by_role("link", name="Main task").click()
    page.wait_for_url(f"**/sessions/{ids['main']}")
    children = page.locator(".session-head details.children")
    children.locator("summary").click()
    assert children.locator("li.child").count() == 2


def test_a_search_hit_says_which_session_it_is_under(browser_page: Any, live: LiveServer) -> None:
    page, ids = browser_page, live.ids
    page.goto(f"{live.base}/?q={WORD}")
    hit = page.locator("li.hit")
    assert hit.count() == 1
    assert "under Main task" in hit.inner_text()
    hit.locator("a.parent").click()
    page.wait_for_url(f"**/sessions/{ids['main']}")
