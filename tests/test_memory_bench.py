"""``bench/memory_locomo.py`` runs on any file of LoCoMo's shape (here a tiny made-up one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench, locomo_conversation, run_json

bench = load_bench("memory_locomo")

SAMPLE = {
    "sample_id": "tiny-1",
    "conversation": locomo_conversation(
        (
            "9:15 am on 3 March, 2021",
            [
                {
                    "speaker": "Rosa",
                    "dia_id": "D1:1",
                    "text": "Hi Tom! I adopted a grey cat called Pixel.",
                },
                {
                    "speaker": "Tom",
                    "dia_id": "D1:2",
                    "text": "Lovely! I started learning the banjo.",
                },
                {
                    "speaker": "Rosa",
                    "dia_id": "D1:3",
                    "text": "We went to Vienna for a concert last week.",
                    "blip_caption": "a photo of an opera house",
                },
            ],
        ),
        (
            "6:40 pm on 12 June, 2022",
            [
                {
                    "speaker": "Tom",
                    "dia_id": "D2:1",
                    "text": "I moved to Leeds in May, new job at a bakery.",
                },
                {"speaker": "Rosa", "dia_id": "D2:2", "text": "Congrats! Pixel says hi."},
            ],
        ),
    ),
    "qa": [
        {
            "question": "What is the name of Rosa's cat?",
            "answer": "Pixel",
            "evidence": ["D1:1"],
            "category": 1,
        },
        {
            "question": "Where did Tom move in 2022?",
            "answer": "Leeds",
            "evidence": ["D2:1"],
            "category": 2,
        },
        {
            "question": "Which instrument is Tom learning?",
            "answer": "banjo",
            "evidence": ["D1:2"],
            "category": 4,
        },
        {
            "question": "What did Rosa say about dragons?",
            "answer": "nothing",
            "category": 5,
            "evidence": [],
        },
    ],
}


def test_json_figures_on_unseen_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(bench, [SAMPLE], tmp_path, capsys)
    assert out["questions"] == 3  # category 5 is left out
    for key in ("recall_at_5", "recall_at_10", "bm25_recall_at_5", "bm25_recall_at_10"):
        assert 0.0 <= out[key] <= 1.0
    assert out["recall_at_10"] == 1.0


def test_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    assert bench.main(["--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "tiny-1" in out and "overall" in out and "search latency median" in out


def test_missing_data_is_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--data", str(tmp_path / "absent.json")]) == 2
    assert "no LoCoMo data at" in capsys.readouterr().err


def test_dates_and_evidence_ids() -> None:
    assert bench.parse_date("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert bench.parse_date("12:05 am on 1 January, 2020").hour == 0
    assert bench.evidence_ids({"evidence": ["D1:3", "D8:6; D9:17"]}) == ["D1:3", "D8:6", "D9:17"]
