"""``bench/memory_extraction.py`` scores facts against LoCoMo-shaped observations (a tiny
made-up sample), offline and with the hybrid extractor against the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench, locomo_conversation, run_json
from tests.fakes import FakeOpenAI

bench = load_bench("memory_extraction")

SAMPLE = {
    "sample_id": "tiny-2",
    "conversation": locomo_conversation(
        (
            "9:15 am on 3 March, 2021",
            [
                {
                    "speaker": "Rosa",
                    "dia_id": "D1:1",
                    "text": "Hi Tom! I adopted a grey cat, Pixel.",
                },
                {"speaker": "Tom", "dia_id": "D1:2", "text": "Lovely! Thanks for telling me!"},
                {
                    "speaker": "Tom",
                    "dia_id": "D1:3",
                    "text": "I started learning the banjo with my uncle in Leeds.",
                },
                {
                    "speaker": "Rosa",
                    "dia_id": "D1:4",
                    "text": "I repainted the garden shed green last weekend, it took three days.",
                },
            ],
        )
    ),
    "observation": {
        "session_1_observation": {
            "Rosa": [
                ["Rosa adopted a grey cat named Pixel.", "D1:1"],
                ["Rosa enjoys opera music.", "D1:4"],
            ],
            "Tom": [["Tom is learning the banjo from his uncle.", ["D1:3"]]],
        }
    },
}


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, float]:
    return run_json(bench, [SAMPLE], tmp_path, capsys, *extra)


def test_coverage_noise_and_ceiling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(tmp_path, capsys)
    assert out["observations"] == 3
    # the cat and the banjo are covered; "opera music" is in no turn
    assert out["observation_coverage"] == pytest.approx(2 / 3)
    assert out["ceiling"] == pytest.approx(2 / 3)
    # three facts (D1:1, D1:3, D1:4): the shed covers nothing
    assert out["facts"] == 3 and out["noise_share"] == pytest.approx(1 / 3)


def test_the_rule() -> None:
    assert bench.content_words("The paintings were beautiful, I think!") == {
        "painti",
        "beauti",
        "think",
    }
    assert bench.covers({"painti", "beauti"}, {"painti", "beauti", "think", "colour"})
    assert not bench.covers({"painti"}, {"painti", "beauti", "think"})


def test_hybrid_against_the_fake_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI() as srv:
        srv.reply_text(
            json.dumps(
                {
                    "entities": [{"name": "Pixel", "kind": "thing", "aliases": []}],
                    "facts": [
                        {"seq": 4, "subject": "Rosa", "statement": "Rosa enjoys opera music."}
                    ],
                    "relations": [],
                }
            )
        )
        out = run(
            tmp_path,
            capsys,
            "--extractor",
            "hybrid",
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            srv.url,
        )
        assert len(srv.requests) == 1
    assert out["model_requests"] == 1 and out["model_failures"] == 0
    # the model's fact for D1:4 replaces the extractive one and covers the opera observation
    assert out["observation_coverage"] == 1.0 and out["noise_share"] == 0.0


def test_ingest_only_stores_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from threadline import open_store

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    url = f"sqlite:///{tmp_path}/s.db"
    assert bench.main(["--data", str(data), "--ingest-only", url]) == 0
    assert "stored 1 conversations (4 turns)" in capsys.readouterr().out
    store = open_store(url)
    (info,) = store.list_sessions(agent="locomo-tiny-2")
    assert info.message_count == 4
    store.close()
