"""The reasoning-gym adapter: a sample of datasets across categories passes the checker, is solved by the
dataset's own answer and not by a wrong one; seeds, retries, rewards, answer extraction and the config.

Needs ``pip install reasoning-gym==0.1.25``: without it these tests fail (not skip) with that command.
"""

from __future__ import annotations

import inspect
import json
import random
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs.adapters.reasoning_gym import (
    REASONING_GYM_INSTALL,
    REASONING_GYM_VERSION,
    AnswerParse,
    ReasoningGymEnv,
    UnavailableDatasetError,
    extract_answer,
    import_reasoning_gym,
)
from envs.checker import check_text_env

try:
    import_reasoning_gym()
except ImportError as exc:  # fail loudly in CI: the adapter is part of the suite
    raise ImportError(f"tests/envs/test_reasoning_gym_env.py needs reasoning-gym: {REASONING_GYM_INSTALL}") from exc

from reasoning_gym.factory import create_dataset

ROOT = Path(__file__).resolve().parents[2]
OFFLINE = json.loads((ROOT / "envs" / "adapters" / "data" / "reasoning_gym_offline.json").read_text())
# Two or so per category of reasoning-gym's (the test below checks each is in the offline list).
SAMPLE = {
    "basic_arithmetic": "arithmetic",
    "gcd": "arithmetic",
    "word_sorting": "algorithmic",
    "caesar_cipher": "algorithmic",
    "simple_equations": "algebra",
    "knights_knaves": "logic",
    "syllogism": "logic",
    "maze": "games",
    "mini_sudoku": "games",
    "shortest_path": "graphs",
    "family_relationships": "graphs",
    "number_sequence": "cognition",
    "simple_geometry": "geometry",
    "coin_flip": "probability",
    "bf": "code",
    "arc_1d": "arc",
    "list_functions": "induction",
}


def test_pinned_version_is_installed():
    assert metadata.version("reasoning-gym") == REASONING_GYM_VERSION


def test_offline_list_is_generated_and_holds_the_sample():
    counts = OFFLINE["counts"]
    assert OFFLINE["reasoning_gym_version"] == REASONING_GYM_VERSION
    assert counts["datasets"] == counts["working"] + sum(counts["unavailable_by_kind"].values())
    assert counts["working"] >= 100
    assert set(OFFLINE["unavailable"]) == {"game_of_life_halting"}  # refused: its verifier accepts any answer
    for name, category in SAMPLE.items():
        assert OFFLINE["working"][name]["category"] == category, name


@pytest.mark.parametrize("dataset", sorted(SAMPLE))
def test_dataset_passes_the_checker_and_its_answer_scores_one(dataset):
    report = check_text_env(lambda: envs.make("reasoning_gym", dataset=dataset), seeds=(0, 1))
    assert report.ok and "oracle" in report.passed
    env = envs.make("reasoning_gym", dataset=dataset)
    env.reset(seed=5)
    answer = env.entry["answer"]
    _, reward, terminated, truncated, info = env.step(f"Let me work it out.\n<answer>{answer}</answer>")
    assert (reward, terminated, truncated, info["success"], info["score"]) == (1.0, True, False, True, 1.0)
    env.reset(seed=5)
    _, reward, terminated, _, info = env.step("<answer>turngym-wrong-answer</answer>")
    assert reward < 1.0 and terminated and not info["success"] and info["action_is_valid"]


def test_reset_seed_is_the_generator_seed():
    env = envs.make("reasoning_gym", dataset="basic_arithmetic")
    for seed in (0, 7, 123456):
        question, info = env.reset(seed=seed)
        assert question == create_dataset("basic_arithmetic", seed=seed, size=1)[0]["question"]
        assert info["generator_seed"] == seed
    # A fixed seed is a fixed question on any machine (the pinned version's generator).
    question, _ = env.reset(seed=0)
    assert env.entry["answer"] == "106475279601"
    assert question.startswith("Calculate")


def test_generators_that_use_the_global_random_module_are_deterministic_too():
    # list_functions draws from Python's global random: the adapter seeds it from the generator seed.
    questions = []
    for perturbation in (1, 2):
        random.seed(perturbation)
        questions.append(envs.make("reasoning_gym", dataset="list_functions").reset(seed=3)[0])
    assert questions[0] == questions[1]


def test_reset_without_a_seed_draws_the_generator_seed_from_np_random():
    env = envs.make("reasoning_gym")
    env.reset(seed=1)
    env.reset()
    drawn = env.generator_seed
    env.reset(seed=1)
    env.reset()
    assert env.generator_seed == drawn and drawn != 1


def test_retries_reward_the_improvement_of_the_best_score():
    env = envs.make("reasoning_gym", dataset="letter_counting", max_turns=4)
    env.reset(seed=0)
    assert env.entry["answer"] == "1"
    # letter_counting keeps reasoning-gym's default score: 1 for the exact answer, else, when the answer "1"
    # is inside the text, len("1") / len(text).
    observation, reward, terminated, _, info = env.step("<answer>1 or 2</answer>")  # 1/6
    assert reward == pytest.approx(1 / 6) and not terminated and info["score"] == pytest.approx(1 / 6)
    assert observation == (
        "Your answer scored 0.17 (1.00 is correct). Try again (3 attempts left): reply with your final answer "
        "in <answer>...</answer>."
    )
    _, reward, _, _, info = env.step("<answer>1 x</answer>")  # 1/3: improves the best by 1/3 - 1/6 = 1/6
    assert reward == pytest.approx(1 / 6) and info["best_score"] == pytest.approx(1 / 3)
    _, reward, _, _, info = env.step("no idea\n\n")  # the last line is "no idea": a score of 0, no improvement
    assert (reward, info["score"], info["action_is_valid"]) == (0.0, 0.0, True)
    _, reward, terminated, truncated, info = env.step("<answer>1</answer>")  # 1 - 1/3
    assert reward == pytest.approx(2 / 3) and (terminated, truncated, info["success"]) == (True, False, True)


def test_the_last_attempt_terminates_and_format_failures_count():
    env = envs.make("reasoning_gym", dataset="letter_counting", max_turns=2)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("<answer>")
    assert (reward, terminated, truncated, info["action_is_valid"]) == (-0.1, False, False, False)
    assert observation == (
        "No answer could be read: unmatched <answer> tag; write the answer as <answer>...</answer>. Try again "
        "(1 attempt left): reply with your final answer in <answer>...</answer>."
    )
    observation, reward, terminated, truncated, _ = env.step("<answer>7</answer>")
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert observation == "Your answer scored 0.00 (1.00 is correct). No attempts left."


def test_a_verifier_that_raises_on_model_text_scores_zero():
    env = envs.make("reasoning_gym", dataset="prime_factorization")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("<answer>not a number</answer>")
    assert (reward, terminated, info["score"]) == (0.0, True, 0.0)
    assert info["score_error"].startswith("ValueError: invalid literal for int()")


def test_datasets_without_a_single_answer_have_no_oracle():
    env = envs.make("reasoning_gym", dataset="rush_hour")
    env.reset(seed=0)
    assert env.entry["answer"] is None and env.oracle() is None
    assert check_text_env(lambda: envs.make("reasoning_gym", dataset="rush_hour"), seeds=(0,)).skipped == {
        "valid_actions": "valid_actions() is None (an open-ended action set)",
        "oracle": "oracle() is None after reset for every seed (no oracle)",
        "state_info": "reset's info has neither state_key nor distance_to_goal (optional state information)",
    }


def test_dataset_options_and_composite_configs():
    env = envs.make("reasoning_gym", dataset="basic_arithmetic", config={"min_terms": 2, "max_terms": 2})
    env.reset(seed=0)
    assert env.entry["metadata"]["num_terms"] == 2
    composite = {"datasets": [{"name": "gcd", "weight": 1.0, "config": {}}]}
    env = envs.make("reasoning_gym", dataset="composite", config=composite)
    env.reset(seed=0)
    assert env.entry["metadata"]["source_dataset"] == "gcd"
    assert env.step(env.oracle()[0])[1] == 1.0


def test_bad_options_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"unknown reasoning-gym dataset 'basic_arithmetik'\. Did you mean "):
        ReasoningGymEnv(dataset="basic_arithmetik")
    with pytest.raises(ValueError, match="config may not set seed or size"):
        ReasoningGymEnv(config={"seed": 3})
    with pytest.raises(UnavailableDatasetError, match="cannot generate a question here: AssertionError: Must spec"):
        ReasoningGymEnv(dataset="composite")
    with pytest.raises(UnavailableDatasetError, match="every non-empty answer scores 1") as caught:
        ReasoningGymEnv(dataset="game_of_life_halting")
    assert caught.value.kind == "broken_verifier"


def test_a_missing_or_other_version_names_the_install_command(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(ImportError, match=r"needs reasoning-gym: pip install reasoning-gym==0\.1\.25"):
        import_reasoning_gym()
    monkeypatch.setattr(metadata, "version", lambda name: "0.1.19")
    with pytest.raises(ImportError, match=r"pinned to reasoning-gym 0\.1\.25, found 0\.1\.19: pip install"):
        import_reasoning_gym()


@pytest.mark.parametrize(
    ("text", "answer", "error"),
    [
        ("<think>2+2 is <answer>5</answer>?</think>\n<answer> 4 </answer>", "4", ""),
        ("<ANSWER>x</ANSWER> then <answer>y</answer>", "y", ""),
        ("Work.\nAnswer: 12\n\n", "12", ""),
        ("The final answer is: Yes", "Yes", ""),
        ("", None, "the answer is empty"),
        ("<answer>   </answer>", None, "the answer is empty"),
        ("<think>still thinking", None, "the <think> block is never closed; close it with </think> before the answer"),
        ("1</answer>", None, "unmatched <answer> tag; write the answer as <answer>...</answer>"),
        ("\x00\x00", None, "the answer contains control characters"),
        ("A" * 4097, None, "the answer is longer than 4096 characters"),
    ],
)
def test_answer_extraction(text, answer, error):
    assert extract_answer(text) == AnswerParse(answer, error)


def test_a_required_tag():
    assert extract_answer("42", require_tag=True).error == "no <answer>...</answer> block"
    assert extract_answer("<final>42</final>", tag="final").answer == "42"


PLAIN = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1).filter(
    lambda a: a.strip() and "<" not in a and ">" not in a and "answer" not in a.lower()
)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_any_text_gives_an_answer_or_a_reason_and_never_raises(text):
    parsed = extract_answer(text)
    assert (parsed.answer is None) != (parsed.error == "")
    if parsed.answer is not None:
        assert parsed.answer == parsed.answer.strip() and 0 < len(parsed.answer) <= 4096


@settings(max_examples=300, deadline=None)
@given(reasoning=st.text().filter(lambda t: "<" not in t), answer=PLAIN)
def test_a_tagged_answer_is_read_back_after_any_reasoning(reasoning, answer):
    assert extract_answer(f"{reasoning}<answer>{answer}</answer>").answer == answer.strip()
    assert extract_answer(f"<think>{reasoning}</think><answer>{answer}</answer>").answer == answer.strip()


@settings(max_examples=300, deadline=None)
@given(reasoning=st.text().filter(lambda t: "<" not in t), answer=PLAIN.filter(lambda a: len(a.splitlines()) == 1))
def test_without_a_tag_the_last_line_is_the_answer(reasoning, answer):
    assert extract_answer(f"{reasoning}\n{answer}\n").answer == answer.strip()


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load((ROOT / "configs" / "env" / "reasoning_gym.yaml").read_text())
    assert config.pop("id") == "reasoning_gym"
    assert config == {name: p.default for name, p in inspect.signature(ReasoningGymEnv).parameters.items()}
    assert envs.spec("reasoning_gym").gym_id == "turngym/ReasoningGym-v0"


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(OFFLINE["working"]))
def test_every_offline_dataset_passes_the_checker(dataset):
    config = OFFLINE["working"][dataset].get("config")
    report = check_text_env(lambda: envs.make("reasoning_gym", dataset=dataset, config=config), seeds=(0,))
    assert report.ok and ("oracle" in report.passed) == OFFLINE["working"][dataset]["oracle"]
