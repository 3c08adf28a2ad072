"""The registry: registration, lookup by short and Gymnasium id, option checking, errors that help."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs
from envs import registry


class TinyEnv(envs.TextEnv):
    """A one-turn environment: answer 'yes'."""

    instructions = "Say yes."
    action_format = "yes"

    def __init__(self, *, reward: float = 1.0, max_turns: int | None = 3, render_mode: str | None = "ansi") -> None:
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.reward = reward

    def _reset(self, options):
        return "Will you?", {}

    def _step(self, action):
        ok = action.strip().lower() == "yes"
        return envs.StepOutcome(
            "Done." if ok else "Say yes.",
            reward=self.reward if ok else 0.0,
            terminated=ok,
            success=ok,
            action_is_valid=ok,
        )

    def render_text(self, color=False):
        return "tiny"


@pytest.fixture
def tiny_id(request):
    env_id = f"tiny-{request.node.name}"
    registry.register(env_id, TinyEnv, reward=2.0)
    yield env_id
    envs.unregister(env_id)


def test_builtins_have_short_and_versioned_ids():
    assert {"sokoban", "frozenlake"} <= set(envs.ids())
    assert envs.spec("sokoban").gym_id == "turngym/Sokoban-v0"
    assert envs.spec("turngym/Sokoban-v0").id == "sokoban"
    assert envs.spec("turngym/FrozenLake-v0").id == "frozenlake"
    assert "turngym/Sokoban-v0" in gym.registry


def test_make_applies_defaults_then_overrides(tiny_id):
    assert envs.make(tiny_id).reward == 2.0
    assert envs.make(tiny_id, reward=5.0).reward == 5.0
    env = envs.make(tiny_id, max_turns=1)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("no")
    assert (reward, terminated, truncated) == (-0.1, False, True)  # format penalty 0.1, then out of turns


def test_make_records_a_gymnasium_spec_with_the_effective_options(tiny_id):
    env = envs.make(tiny_id, reward=7.0)
    assert env.spec.id == f"turngym/{tiny_id}"
    assert env.spec.kwargs == {"reward": 7.0}
    assert env.spec.make().unwrapped.reward == 7.0


def test_gymnasium_make_uses_the_same_registration(tiny_id):
    env = gym.make(f"turngym/{tiny_id}", reward=3.0)
    assert env.unwrapped.reward == 3.0
    observation, info = env.reset(seed=1)
    assert observation == "Will you?"
    assert env.step("YES")[1:4] == (3.0, True, False)


def test_unknown_option_fails_early_with_a_close_match(tiny_id):
    with pytest.raises(TypeError, match=r"does not accept 'rewrd' \(did you mean 'reward'\?\); its options are: "):
        envs.make(tiny_id, rewrd=1.0)


def test_unknown_id_lists_close_matches():
    expected = r"unknown environment id 'sokobn'\. Did you mean 'sokoban'"
    with pytest.raises(envs.UnknownEnvironmentError, match=expected):
        envs.make("sokobn")
    with pytest.raises(KeyError):  # also a KeyError, for callers that catch lookups generically
        envs.spec("no-such-env-anywhere")


def test_duplicate_ids_are_rejected(tiny_id):
    with pytest.raises(ValueError, match="already registered"):
        registry.register(tiny_id, TinyEnv)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("another-id", TinyEnv, gym_id=f"turngym/{tiny_id}")


def test_string_entry_points_are_imported_lazily():
    registry.register("countdown-by-string", "turngym_example_plugin:CountdownEnv", description="lazy", start=5)
    try:
        assert envs.spec("countdown-by-string").description == "lazy"
        assert envs.make("countdown-by-string").start == 5
    finally:
        envs.unregister("countdown-by-string")


def test_malformed_string_entry_point_is_reported():
    registry.register("bad-entry-point", "no_colon_here")
    try:
        with pytest.raises(ValueError, match=r"must look like 'package\.module:Name'"):
            envs.make("bad-entry-point")
    finally:
        envs.unregister("bad-entry-point")


def test_entry_point_must_build_an_env():
    registry.register("not-an-env", lambda: object())
    try:
        with pytest.raises(TypeError, match=r"not a gymnasium\.Env"):
            envs.make("not-an-env")
    finally:
        envs.unregister("not-an-env")


def test_description_defaults_to_the_docstring(tiny_id):
    assert envs.spec(tiny_id).description == "A one-turn environment: answer 'yes'."


def test_unregister_removes_both_ids_and_rejects_unknown_ones():
    registry.register("short-lived", TinyEnv)
    envs.unregister("short-lived")
    assert "short-lived" not in envs.ids() and "turngym/short-lived" not in gym.registry
    with pytest.raises(envs.UnknownEnvironmentError, match="not registered"):
        envs.unregister("short-lived")
