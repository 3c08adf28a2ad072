"""Every config file composes; env selection, option rewriting and the one-line usage errors."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

import configs
import envs
from agents.command_config import align_env_turns, rewrite_overrides, turn_cap_note
from agents.config import PlayConfig, UsageError, compose_play_config, env_options, to_play_config

CONFIG_ROOT = Path(configs.__file__).parent
# env=agent is not an environment: an agent program plays in its place (trainer.run, agents.eval).
ENV_CONFIGS = sorted(p.stem for p in (CONFIG_ROOT / "env").glob("*.yaml") if p.stem not in ("registered", "agent"))


def test_every_yaml_under_configs_parses():
    paths = sorted(CONFIG_ROOT.rglob("*.yaml"))
    assert CONFIG_ROOT / "play.yaml" in paths and CONFIG_ROOT / "env" / "registered.yaml" in paths
    for path in paths:
        assert isinstance(OmegaConf.load(path), DictConfig), path


# The only values an env config sets away from the constructor's default, each documented in its file.
CONFIG_CHOICES = {("sokoban", "max_moves"): 3}


@pytest.mark.parametrize("name", ENV_CONFIGS)
def test_play_composes_with_each_env_config_and_its_options_build_the_env(name, request):
    if name == "code":  # its default sandbox is Docker where a daemon answers: the image must exist
        request.getfixturevalue("code_sandbox_ready")
    play = to_play_config(compose_play_config([f"env={name}"]))
    assert play.agent == "human" and play.seed is None and play.out is None
    options = env_options(play)
    env = envs.make(play.env["id"], **options)
    env.reset(seed=0)
    # Each env config lists every constructor option with its default (or a documented choice, above), so
    # YAML and code cannot drift apart.
    parameters = inspect.signature(envs.spec(play.env["id"]).load()).parameters.values()
    defaults = {p.name: p.default for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    assert sorted(options) == sorted(defaults)
    for key, default in defaults.items():
        expected = CONFIG_CHOICES.get((name, key), list(default) if isinstance(default, tuple) else default)
        assert options[key] == expected, key


def test_registered_fallback_for_ids_without_a_config_file():
    # "countdown" comes from the example plugin package the test session installs (tests/conftest.py).
    assert rewrite_overrides(["env=countdown"], PlayConfig) == ["env=registered", "env.id=countdown"]
    play = to_play_config(compose_play_config(["env=countdown", "env.start=9", "seed=4", "agent=oracle"]))
    assert play.env == {"id": "countdown", "start": 9}
    assert (play.seed, play.agent) == (4, "oracle")
    assert env_options(play) == {"start": 9}


def test_gymnasium_ids_resolve_to_the_short_ids_config():
    short = envs.spec("turngym/FrozenLake-v0").id
    expected = f"env={short}" if short in ENV_CONFIGS else "env=registered"
    assert rewrite_overrides(["env=turngym/FrozenLake-v0"], PlayConfig)[0] == expected


def test_env_options_not_in_the_yaml_are_added():
    assert rewrite_overrides(["env=countdown", "env.x=1", "++env.y=2", "seed=3"], PlayConfig)[2:] == [
        "++env.x=1",
        "++env.y=2",
        "seed=3",
    ]
    play = to_play_config(compose_play_config(["env=registered", "env.id=countdown", "env.brand_new=[1,2]"]))
    assert play.env["brand_new"] == [1, 2]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["env=sokobn"], "Did you mean 'sokoban'"),
        ([], "choose an environment with env=<id>"),
        (["env=registered"], "env.id is missing"),
        (["env=countdown", "agent=orcale"], "did you mean 'oracle'"),
        (["env=countdown", "seed=abc"], "could not be converted to Integer"),
        (["env=countdown", "sed=3"], "did you mean 'seed'"),
        (["env=countdown", "episodes=0"], "episodes must be at least 1"),
        (["env=countdown", "delay=-1"], "delay is in seconds"),
        (["env=countdown", "seed=[1"], "cannot parse the override 'seed=[1'"),
        (["env=countdown", "seed"], "overrides look like key=value"),
    ],
)
def test_usage_errors_are_one_line(overrides, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[")) as caught:
        to_play_config(compose_play_config(overrides))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("own", "loop", "said"),
    [(5, 8, True), (5, 5, False), (5, 3, False), (None, 8, False), (5, None, False)],
)
def test_turn_cap_note_speaks_only_when_the_environments_limit_is_the_smaller(own, loop, said):
    env = {"id": "sokoban", "max_turns": own}
    align_env_turns(env, loop)
    note = turn_cap_note(env, loop, "rollout.max_turns")
    assert (note is not None) == said
    if said:
        assert note.startswith(
            f"episodes end after at most {own} turn(s): env.max_turns={own} is below rollout.max_turns="
        )
