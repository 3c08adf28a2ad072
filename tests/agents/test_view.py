"""agents.view: the run report's data, its self-contained page, and the command's errors."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.record import EpisodeRecord
from agents.report.curves import curve_panels, parse_metrics
from agents.report.episodes import parse_lines
from agents.report.page import build_report, render_html, report_data, token_text, write_report
from agents.trajectory import Trajectory, write_trajectories
from agents.view import main, parse_args

REPO = Path(__file__).resolve().parents[2]

#: token id -> text of the hand-built episodes (a stand-in tokenizer)
VOCAB = {1: "<|im_start|>", 2: "user", 3: "\n", 4: "<|im_end|>", 5: "assistant", 10: "Up", 11: " ||", 12: " Left"}


class FakeTokenizer:
    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(VOCAB[i] for i in ids)


def hand_built_trajectory(seed: int = 3, success: bool = True) -> Trajectory:
    """Two turns: ``Up || Left`` then ``Up``, the second closed by the stop token; rewards -0.1 and 10.9."""
    return Trajectory(
        env_id="sokoban",
        seed=seed,
        group_id=f"eval/{seed}",
        prompt_ids=[1, 2, 3, 4, 1, 5, 3],
        # sampled: Up || Left <im_end> | template: \n <im_start> user \n ... | sampled: Up <im_end>
        response_ids=[10, 11, 12, 4, 3, 1, 2, 3, 4, 3, 1, 5, 3, 10, 4],
        response_mask=[1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
        rollout_logprobs=[-0.5, -0.25, -1.5, -0.125, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.75, -0.0625],
        rollout_values=[4.5, 6.0, 7.25, 9.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10.0, -2.125],
        turn_rewards=[-0.1, 10.9],
        turn_end_indices=[3, 14],
        episode_return=10.8,
        success=success,
        num_turns=2,
        messages=[
            {"role": "system", "content": "Push the box."},
            {"role": "user", "content": "#####\n#P X#\n#####"},
            {"role": "assistant", "content": "Up || Left"},
            {"role": "user", "content": "You moved: Up (blocked), Left.\n#####\n# PX#\n#####"},
            {"role": "assistant", "content": "Up"},
            {"role": "user", "content": "Solved."},
        ],
        finish_reasons=["stop", "stop"],
    )


def scripted_record(seed: int = 5) -> EpisodeRecord:
    return EpisodeRecord(
        env_id="frozenlake",
        env_options={},
        seed=seed,
        agent="oracle",
        messages=[
            {"role": "system", "content": "Cross the lake."},
            {"role": "user", "content": "SFF\nFHF\nFFG"},
            {"role": "assistant", "content": "jump"},
            {"role": "user", "content": "Invalid."},
        ],
        actions=["jump"],
        rewards=[-1.0],
        action_is_valid=[False],
        success=False,
        terminated=False,
        truncated=True,
        termination_reason="truncated",
    )


def page_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_the_token_data_of_a_known_trajectory_come_from_its_ids_masks_and_logprobs(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, [hand_built_trajectory()])
    report = build_report(path, tokenizer=FakeTokenizer())
    data = report_data(report)
    tokens = data["episodes"][0]["tokens"]
    assert tokens["prompt"] == [1, 2, 3, 4, 1, 5, 3]
    assert tokens["mask"] == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    # only the sampled tokens' logprobs, in order (the zeros of mask 0 are not sent)
    assert tokens["logprobs"] == [-0.5, -0.25, -1.5, -0.125, -0.75, -0.0625]
    assert tokens["values"] == [4.5, 6.0, 7.25, 9.5, 10.0, -2.125]  # the engine's values, sampled tokens only
    assert tokens["ends"] == [3, 14] and tokens["rewards"] == [-0.1, 10.9]
    assert data["vocab"] == {str(k): v for k, v in VOCAB.items()}
    unvalued = hand_built_trajectory()
    unvalued.rollout_values = []  # no value head in the engine (or no critic): no values to show
    write_trajectories(tmp_path / "unvalued.jsonl", [unvalued])
    report = build_report(tmp_path / "unvalued.jsonl", tokenizer=FakeTokenizer())
    assert "values" not in report_data(report)["episodes"][0]["tokens"]


def test_turns_pair_each_observation_with_its_reply_reward_and_info(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, [hand_built_trajectory()])
    episode = report_data(build_report(path, tokenizer=FakeTokenizer()))["episodes"][0]
    assert episode["system"] == "Push the box."
    assert [t["observation"] for t in episode["turns"]] == [
        "#####\n#P X#\n#####",
        "You moved: Up (blocked), Left.\n#####\n# PX#\n#####",
    ]
    assert [t["action"] for t in episode["turns"]] == ["Up || Left", "Up"]
    assert [t["reward"] for t in episode["turns"]] == [-0.1, 10.9]
    assert [t["info"]["finish_reason"] for t in episode["turns"]] == ["stop", "stop"]
    assert episode["final"] == "Solved."


def test_an_episode_record_keeps_the_validity_of_each_action(tmp_path: Path) -> None:
    path = tmp_path / "play.jsonl"
    path.write_text(scripted_record().to_json() + "\n")
    episode = report_data(build_report(path))["episodes"][0]
    assert episode["turns"][0]["valid"] is False and episode["turns"][0]["reward"] == -1.0
    assert episode["invalid"] == 1 and "tokens" not in episode


def test_the_page_is_self_contained_and_its_data_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    tricky = hand_built_trajectory()
    tricky.messages[1]["content"] = "</script><script>alert(1)</script> <!-- \u2028 https://example.com"
    write_trajectories(path, [tricky, hand_built_trajectory(seed=4)])
    report = build_report(path, tokenizer=FakeTokenizer())
    html = render_html(report)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<link" not in html and html.count("<script") == 2  # the data and the inline script
    assert page_data(html) == json.loads(json.dumps(report_data(report)))
    assert page_data(html)["episodes"][0]["turns"][0]["observation"] == tricky.messages[1]["content"]


def test_curves_take_the_run_metrics_and_the_difficulty_buckets() -> None:
    lines = [
        json.dumps({"step": 0, "eval/success_rate": 0.5, "eval/success_stderr": 0.1, "eval/success_moves_1-3": 0.5}),
        json.dumps({"step": 1, "reward/mean": 1.0, "reward/std": 2.0, "actor/kl_ref": 0.01, "actor/entropy": 0.3}),
        json.dumps({"step": 2, "reward/mean": None, "eval/success_rate": 0.75, "eval/success_stderr": 0.05}),
        "{not json",
        json.dumps({"step": "3"}),
    ]
    records, skipped = parse_metrics(lines)
    assert skipped == 2
    panels = {p["title"]: p for p in curve_panels(records)}
    success = panels["held-out success"]["lines"][0]
    assert success["points"] == [[0, 0.5], [2, 0.75]]
    assert success["band"] == [[0, 0.4, 0.6], [2, 0.7, 0.8]]
    assert panels["training reward"]["lines"][0]["points"] == [[1, 1.0]]  # the null at step 2 is a gap
    assert [line["label"] for line in panels["held-out success by difficulty"]["lines"]] == ["moves_1-3"]
    assert "entropy" in panels and "KL" in panels


lines_of_text = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.just(hand_built_trajectory().to_json()),
        st.just(scripted_record().to_json()),
        st.just(hand_built_trajectory().to_json()[:-7]),  # cut short, as a killed writer leaves it
        st.dictionaries(st.text(max_size=5), st.integers()).map(json.dumps),
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_of_text)
def test_every_non_blank_line_is_an_episode_or_counted_as_skipped(lines: list[str]) -> None:
    one_per_line = [line.replace("\n", " ").replace("\r", " ") for line in lines]
    parsed = parse_lines([line + "\n" for line in one_per_line], "file", None)
    assert len(parsed.episodes) + parsed.skipped == sum(1 for line in one_per_line if line.strip())
    good = sum(line in (hand_built_trajectory().to_json(), scripted_record().to_json()) for line in one_per_line)
    assert len(parsed.episodes) == good


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=30), st.just('{"step": 1, "reward/mean": 2.5}')), max_size=6))
def test_metrics_lines_are_records_or_counted_as_skipped(lines: list[str]) -> None:
    one_per_line = [line.replace("\n", " ").replace("\r", " ") for line in lines]
    records, skipped = parse_metrics(one_per_line)
    assert len(records) + skipped == sum(1 for line in one_per_line if line.strip())
    assert all(isinstance(r["step"], int) for r in records)


def test_malformed_lines_are_skipped_and_counted_on_the_page_and_stderr(tmp_path: Path, capsys) -> None:
    path = tmp_path / "play.jsonl"
    path.write_text(scripted_record().to_json() + "\n{broken\n\n[1, 2]\n" + scripted_record(6).to_json() + "\n")
    out = tmp_path / "report.html"
    assert main([str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("turngym: warning: skipped 2 malformed line(s)") and "\n" not in err
    data = page_data(out.read_text())
    assert [e["seed"] for e in data["episodes"]] == [5, 6]
    assert data["skipped"] == 2 and any("skipped 2 malformed" in note for note in data["notes"])


def test_a_trajectory_file_without_a_known_model_says_there_is_no_token_view(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, [hand_built_trajectory()])
    assert main([str(path)]) == 0
    data = page_data((tmp_path / "episodes.html").read_text())
    assert data["vocab"] is None and any("--model" in note for note in data["notes"])


def test_a_run_directory_reads_its_metrics_evaluations_and_samples(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/success_rate": 1.0}) + "\n")
    write_trajectories(tmp_path / "evaluations" / "step_000004.jsonl", [hand_built_trajectory()])
    sample = {"env_id": "sokoban", "seed": 9, "success": False, "episode_return": -0.3, "termination": "truncated"}
    sample |= {"num_turns": 0, "turn_rewards": [], "num_invalid_actions": 0, "sampled_tokens": 0, "messages": []}
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "step_000001.jsonl").write_text(json.dumps(sample) + "\n")
    data = report_data(build_report(tmp_path, tokenizer=FakeTokenizer()))
    assert [(e["source"], e["step"], e["seed"]) for e in data["episodes"]] == [
        ("evaluations/step_000004", 4, 3),
        ("samples/step_000001", 1, 9),
    ]
    assert [p["title"] for p in data["panels"]] == ["held-out success"]


def test_command_line_arguments() -> None:
    assert parse_args(["run", "--out=a.html", "--model", "tiny"]) == (Path("run"), Path("a.html"), "tiny")
    for bad in ([], ["a", "b"], ["a", "--out"], ["a", "--colour"]):
        with pytest.raises(ValueError):
            parse_args(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/run"], "no such run directory or file: /no/such/run"),
        (["a", "--bogus"], "unknown flag '--bogus'"),
        ([], "give a run directory or an episodes JSONL file"),
        (["pyproject.toml", "--model", "./no/such/model"], "--model ./no/such/model is not a directory"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agents.view", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("turngym: error: " + message)


def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_help_prints_the_usage(capsys) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m agents.view")


def test_write_report_replaces_the_runs_page_whole(tmp_path: Path) -> None:
    write_trajectories(tmp_path / "evaluations" / "step_000000.jsonl", [hand_built_trajectory()])
    (tmp_path / "report.html").write_text("an older page")
    path = write_report(tmp_path, tokenizer=FakeTokenizer())
    assert path == tmp_path / "report.html" and not (tmp_path / "report.html.tmp").exists()
    assert page_data(path.read_text())["episodes"][0]["tokens"]["mask"] == hand_built_trajectory().response_mask


def test_a_report_that_cannot_be_written_is_a_warning_of_the_run_never_a_stop(tmp_path: Path, caplog) -> None:
    from trainer.components import Components

    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with caplog.at_level(logging.WARNING, logger="trainer.run"):
        Components.write_report(SimpleNamespace(run_dir=not_a_folder))  # the one method the hook calls
    assert [r.getMessage().startswith("no report.html: ") for r in caplog.records] == [True]


def test_the_token_text_comes_from_the_named_models_tokenizer(tmp_path: Path) -> None:
    from agents.models import load_tokenizer

    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, [hand_built_trajectory()])
    assert main([str(path), "--model", "tiny"]) == 0
    vocab = page_data((tmp_path / "episodes.html").read_text())["vocab"]
    tokenizer = load_tokenizer("tiny")
    assert vocab == {str(i): tokenizer.decode([i]) for i in VOCAB}


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from agents.models import load_tokenizer

    return load_tokenizer("tiny")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_characters="\\", blacklist_categories=("Cs",)), max_size=12))
def test_token_texts_join_to_the_texts_bytes_with_no_replacement_character(tiny_tokenizer, text: str) -> None:
    ids = tiny_tokenizer.encode(text, add_special_tokens=False)
    if tiny_tokenizer.decode(ids) != text:  # the tokenizer itself does not round-trip this text
        return
    pieces = [token_text(tiny_tokenizer, i) for i in ids]
    assert all("\ufffd" not in piece for piece in pieces)
    # a partial character is shown as its bytes, \xNN each: put them back and the pieces are the text
    unescaped = [re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), p.encode()) for p in pieces]
    assert b"".join(unescaped) == text.encode("utf-8")
