"""The episode loop, position by position, with a scripted env, a scripted engine and a character renderer."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from episode_doubles import STOP, CharRenderer, ScriptedEngine, ScriptedEnv

from agents.engines.base import Generation
from agents.episode import EpisodeLimits, EpisodeSpec, _move_tokens, run_chat_episode, run_episode, token_char_ends
from agents.trajectory import Trajectory

SPEC = EpisodeSpec(env_id="scripted", seed=7, group_id="g0", sample_index=3)


def ids(text: str) -> list[int]:
    return [ord(c) for c in text]


def play(env, engine, limits=None, **kwargs) -> Trajectory:
    trajectory = asyncio.run(run_episode(env, engine, CharRenderer(), SPEC, limits=limits, **kwargs))
    trajectory.validate()
    assert Trajectory.from_json(trajectory.to_json()) == trajectory
    return trajectory


def test_ids_mask_logprobs_and_rewards_position_by_position():
    env = ScriptedEnv(rewards=(0.0, 0.5, 1.0))
    engine = ScriptedEngine([("ab", -0.5, "stop"), ("c", -0.25, "length"), ("d", -1.0, "stop")])
    t = play(env, engine)

    assert t.prompt_ids == ids("S:sys|U:o0|A:")
    # turn 1: a b STOP sampled (3); the stop token was sampled, so no glue: |U:o1|A: (8)
    # turn 2: c sampled (1, cut by length); glue STOP, then |U:o2|A: (9)
    # turn 3: d STOP sampled (2); the episode terminates, nothing follows
    expected_ids = [*ids("ab"), STOP, *ids("|U:o1|A:"), *ids("c"), STOP, *ids("|U:o2|A:"), *ids("d"), STOP]
    expected_mask = [1, 1, 1] + [0] * 8 + [1] + [0] * 9 + [1, 1]
    expected_logprobs = [-0.5] * 3 + [0.0] * 8 + [-0.25] + [0.0] * 9 + [-1.0] * 2
    assert t.response_ids == expected_ids
    assert t.response_mask == expected_mask
    assert t.rollout_logprobs == expected_logprobs
    assert len(t.response_ids) == len(t.response_mask) == len(t.rollout_logprobs) == 23
    # each turn's reward sits on its last sampled token: index 2 (STOP), 11 (c), 22 (STOP)
    assert t.turn_end_indices == [2, 11, 22]
    assert t.turn_rewards == [0.0, 0.5, 1.0]
    assert t.episode_return == 1.5 and t.success and t.termination == "terminated"
    assert t.finish_reasons == ["stop", "length", "stop"]
    assert env.actions == ["ab", "c", "d"]  # the stop token never reaches the environment
    assert t.num_turns == 3 and t.num_invalid_actions == 0
    assert [m["role"] for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_engine_values_sit_on_their_sampled_tokens_or_are_absent_for_the_whole_trajectory():
    script = [("ab", -0.5, "stop"), ("c", -0.25, "length"), ("d", -1.0, "stop")]
    t = play(ScriptedEnv(rewards=(0.0, 0.5, 1.0)), ScriptedEngine(script, values=[2.0, -1.5, 0.25]))
    # the layout of the test above: 3 sampled, 8 glue, 1 sampled, 9 glue, 2 sampled
    assert t.rollout_values == [2.0] * 3 + [0.0] * 8 + [-1.5] + [0.0] * 9 + [0.25] * 2
    for values in ([2.0, None, 0.25], [None, -1.5, 0.25], [2.0, -1.5, None]):  # one turn without them: none kept
        t = play(ScriptedEnv(rewards=(0.0, 0.5, 1.0)), ScriptedEngine(script, values=values))
        assert t.rollout_values == [] and len(t.rollout_logprobs) == 23
    assert play(ScriptedEnv(rewards=(0.0, 0.5, 1.0)), ScriptedEngine(script)).rollout_values == []


def test_each_request_is_the_whole_sequence_so_far_with_stop_ids_and_one_affinity_key():
    engine = ScriptedEngine([("ab", -0.5, "stop"), ("c", -0.25, "length"), ("d", -1.0, "stop")])
    t = play(ScriptedEnv(), engine)
    inputs = [request[0] for request in engine.requests]
    assert inputs == [t.prompt_ids, t.prompt_ids + t.response_ids[:11], t.prompt_ids + t.response_ids[:21]]
    assert all(STOP in request[1].stop_token_ids for request in engine.requests)
    assert {request[2] for request in engine.requests} == {"scripted/g0/3"}


def test_observation_that_does_not_fit_ends_the_episode_with_max_tokens():
    # prompt 13 tokens; turn 1 samples 3 (total 16); the continuation (8) plus one token would make 25 > 20
    engine = ScriptedEngine([("ab", -0.5, "stop")])
    t = play(ScriptedEnv(), engine, limits=EpisodeLimits(max_total_tokens=20))
    assert t.termination == "max_tokens"
    assert t.response_ids == [*ids("ab"), STOP] and t.response_mask == [1, 1, 1]
    assert t.turn_rewards == [0.0] and t.num_turns == 1
    assert t.messages[-1] == {"role": "assistant", "content": "ab"}  # the dropped observation is not kept
    assert t.trainable


def test_turn_budget_is_capped_by_the_context_budget():
    # budget after the 13-token prompt is 2: the engine is asked for at most 2 new tokens
    engine = ScriptedEngine([("abcdef", -0.5, "stop")])
    t = play(ScriptedEnv(), engine, limits=EpisodeLimits(max_total_tokens=15, max_new_tokens=100))
    assert engine.requests[0][1].max_new_tokens == 2
    assert t.response_ids == ids("ab") and t.finish_reasons == ["length"]
    assert t.termination == "max_tokens" and t.num_tokens == 15


def test_prompt_that_fills_the_budget_samples_nothing():
    engine = ScriptedEngine([("ab", -0.5, "stop")])
    t = play(ScriptedEnv(), engine, limits=EpisodeLimits(max_total_tokens=13))
    assert t.termination == "max_tokens" and t.response_ids == [] and not t.trainable
    assert engine.requests == []


def test_turn_limit_truncates_without_a_trailing_observation():
    engine = ScriptedEngine([("x", -0.1, "stop")])
    t = play(ScriptedEnv(rewards=(0.0, 0.0, 1.0)), engine, limits=EpisodeLimits(max_turns=2))
    assert t.termination == "truncated" and t.num_turns == 2
    assert t.response_mask[-2:] == [1, 1]  # the episode ends on sampled tokens


def test_environment_truncation_is_reported():
    engine = ScriptedEngine([("x", -0.1, "stop")])
    t = play(ScriptedEnv(rewards=(0.0, 0.0, 1.0), max_turns=1), engine)
    assert t.termination == "truncated" and t.num_turns == 1


def test_invalid_actions_are_counted_and_penalised():
    engine = ScriptedEngine([("bad", -0.1, "stop"), ("ok", -0.1, "stop")])
    t = play(ScriptedEnv(rewards=(0.0, 1.0)), engine)
    assert t.num_invalid_actions == 1
    assert t.turn_rewards == [-0.1, 1.0]  # ScriptedEnv's default format penalty is 0.1
    assert t.episode_return == 0.9


def test_environment_exception_gives_an_error_trajectory():
    engine = ScriptedEngine([("x", -0.1, "stop")])
    t = play(ScriptedEnv(fail_at=2), engine)
    assert t.termination == "error" and "scripted failure at step 2" in t.error
    assert not t.trainable and t.num_turns == 1


def test_hung_step_is_abandoned_after_its_timeout():
    env = ScriptedEnv(hang_at=1)
    started = time.perf_counter()
    t = play(env, ScriptedEngine([("x", -0.1, "stop")]), limits=EpisodeLimits(step_timeout_s=0.2))
    env.release.set()
    assert time.perf_counter() - started < 5
    assert t.termination == "error" and "did not return within 0.2 s" in t.error


def test_engine_failure_and_abort_give_error_trajectories():
    t = play(ScriptedEnv(), ScriptedEngine([("x", -0.1, "stop")], fail_at=2))
    assert t.termination == "error" and t.error.startswith("ConnectionError")
    t = play(ScriptedEnv(), ScriptedEngine([("x", -0.1, "abort")]))
    assert t.termination == "error" and "aborted" in t.error


def test_policy_version_defaults_to_the_engines():
    engine = ScriptedEngine([("x", -0.1, "stop")])
    asyncio.run(engine.update_weights({}, policy_version=4))
    assert play(ScriptedEnv(rewards=(1.0,)), engine).policy_version == 4
    assert play(ScriptedEnv(rewards=(1.0,)), engine, policy_version=9).policy_version == 9


def test_many_episodes_share_one_event_loop():
    async def main():
        engine = ScriptedEngine([("x", -0.1, "stop")])
        runs = [run_episode(ScriptedEnv(rewards=(0.0, 1.0)), engine, CharRenderer(), SPEC) for _ in range(50)]
        return await asyncio.gather(*runs)

    trajectories = asyncio.run(main())
    assert all(t.termination == "terminated" and t.episode_return == 1.0 for t in trajectories)


def test_limits_are_validated():
    with pytest.raises(ValueError, match="max_new_tokens"):
        EpisodeLimits(max_new_tokens=0)
    with pytest.raises(ValueError, match="step_timeout_s"):
        EpisodeLimits(step_timeout_s=0)


def test_observer_sees_every_step():
    events = []
    engine = ScriptedEngine([("ab", -0.5, "stop"), ("c", -0.25, "length"), ("d", -1.0, "stop")])
    play(ScriptedEnv(), engine, observer=events.append)
    assert [(e.turn, e.action, e.observation, e.reward) for e in events] == [
        (0, None, "o0", 0.0),  # the reset
        (1, "ab", "o1", 0.0),
        (2, "c", "o2", 0.5),
        (3, "d", "o3", 1.0),
    ]
    assert [e.terminated for e in events] == [False, False, False, True]
    assert events[2].generation.finish_reason == "length"


def test_chat_episode_records_text_turns_without_tokens():
    replies = iter(["bad", "fine", "done"])

    async def chat(messages, sampling):
        assert messages[-1]["role"] == "user"  # the policy always answers an observation
        return Generation((), (), "stop", text=next(replies))

    env = ScriptedEnv(rewards=(0.0, 0.0, 1.0))
    t = asyncio.run(run_chat_episode(env, chat, SPEC))
    t.validate()
    assert env.actions == ["bad", "fine", "done"]
    assert t.termination == "terminated" and t.success and t.num_invalid_actions == 1
    assert t.episode_return == 0.9 and t.turn_rewards == [] and not t.trainable
    assert t.messages[-2] == {"role": "assistant", "content": "done"}


def test_chat_episode_failure_is_an_error_trajectory():
    async def chat(messages, sampling):
        raise TimeoutError("API timed out")

    t = asyncio.run(run_chat_episode(ScriptedEnv(), chat, SPEC))
    assert t.termination == "error" and t.error == "TimeoutError: API timed out"


class StatefulEnv(ScriptedEnv):
    """ScriptedEnv that reports its position as the last action's text and a distance that counts down."""

    def _reset(self, options):
        observation, info = super()._reset(options)
        return observation, {**info, "state_key": "start", "distance_to_goal": len(self.rewards)}

    def _step(self, action):
        outcome = super()._step(action)
        distance = None if action == "lost" else len(self.rewards) - len(self.actions)
        extra = {"state_key": f"after-{action}", "distance_to_goal": distance}
        return dataclasses.replace(outcome, extra_info={**outcome.extra_info, **extra})


def test_state_keys_and_distances_are_recorded_per_trained_turn():
    env = StatefulEnv(rewards=(0.0, 0.0, 1.0))
    engine = ScriptedEngine([("ab", -0.5, "stop"), ("lost", -0.25, "stop"), ("d", -1.0, "stop")])
    t = play(env, engine)
    # each turn records the position it started from, and the distance before and after its step
    assert t.turn_state_keys == ["start", "after-ab", "after-lost"]
    assert t.turn_distances_before == [3, 2, None]
    assert t.turn_distances_after == [2, None, 0]
    assert t.initial_distance == 3 and t.has_state_info


def test_an_env_without_state_info_leaves_the_state_fields_empty():
    t = play(ScriptedEnv(rewards=(0.0, 1.0)), ScriptedEngine([("a", -0.5, "stop"), ("b", -0.5, "stop")]))
    assert t.turn_state_keys == t.turn_distances_before == t.turn_distances_after == []
    assert t.initial_distance is None and not t.has_state_info


def test_the_prompt_shows_the_environments_tools_whatever_tools_the_renderer_was_built_with():
    # A rollout actor builds one renderer for every episode it plays; the prompt must still carry the tools of
    # the environment being played (as agents.eval's renderer, built with them, renders it), and a renderer
    # built with other tools must not leak them into an episode of an environment without any.
    from pathlib import Path

    from transformers import AutoTokenizer

    from agents.chat import ChatRenderer

    tokenizer = AutoTokenizer.from_pretrained(Path(__file__).resolve().parents[1] / "fixtures/tokenizers/chatml_qwen")
    tools = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object", "properties": {}}}}]
    other = [{"type": "function", "function": {"name": "jump", "parameters": {"type": "object", "properties": {}}}}]
    with_tools = ChatRenderer(tokenizer, tools=tools)
    bare = ChatRenderer(tokenizer)
    for built_with in (bare, with_tools, ChatRenderer(tokenizer, tools=other)):
        for env_tools, expected in ((tools, with_tools), (None, bare)):
            env = ScriptedEnv(rewards=(1.0,))
            env.tools = env_tools
            engine = ScriptedEngine([("a", -0.5, "stop")])
            t = asyncio.run(run_episode(env, engine, built_with, SPEC))
            assert t.error is None
            assert t.prompt_ids == expected.prompt_ids(t.messages[:2])
            assert ('"name": "look"' in tokenizer.decode(t.prompt_ids)) == (env_tools is not None)
            assert '"jump"' not in tokenizer.decode(t.prompt_ids)


class MovesEnv(StatefulEnv):
    """StatefulEnv whose turns hold moves: every letter of the action is one move, each a step closer to the goal,
    except ``x``, which loses the level; it reports each move's distance and where the move was written."""

    def _reset(self, options):
        self.distance = 9
        return super()._reset(options)

    def _step(self, action):
        outcome = super()._step(action)
        spans, distances = [], []
        for i, char in enumerate(action):
            if char.isalpha():
                self.distance = None if char == "x" or self.distance is None else self.distance - 1
                spans.append([i, i + 1])
                distances.append(self.distance)
        extra = {"distance_to_goal": self.distance, "move_spans": spans, "move_distances": distances}
        return dataclasses.replace(outcome, extra_info={**outcome.extra_info, **extra})


def test_each_moves_last_token_and_distance_are_recorded_per_turn():
    env = MovesEnv(rewards=(0.0, 0.0, 1.0))
    engine = ScriptedEngine([("a|b", -0.5, "stop"), ("", -0.5, "stop"), ("cx", -0.5, "stop")])
    t = play(env, engine)
    # one token per character: turn 0 samples a | b STOP at response indices 0-3 (then 4 observation tokens
    # |U:o1 and A: ... ), so its moves end at the tokens of "a" (0) and "b" (2)
    turn1 = t.turn_end_indices[0] + 1 + len("|U:o1|A:")
    assert t.turn_move_end_indices[0] == [0, 2] and t.turn_move_distances[0] == [8, 7]
    assert t.turn_move_end_indices[1] == [] and t.turn_move_distances[1] == []  # a turn with no move
    turn2 = turn1 + 1 + len("|U:o2|A:")
    assert t.turn_move_end_indices[2] == [turn2, turn2 + 1] and t.turn_move_distances[2] == [6, None]
    assert [t.response_ids[i] for i in t.turn_move_end_indices[2]] == [ord("c"), ord("x")]


def test_an_env_without_move_information_leaves_the_move_fields_empty():
    t = play(StatefulEnv(rewards=(0.0, 1.0)), ScriptedEngine([("ab", -0.5, "stop"), ("c", -0.5, "stop")]))
    assert t.has_state_info and t.turn_move_end_indices == t.turn_move_distances == []


def test_moves_that_cannot_be_placed_on_their_own_tokens_are_left_out():
    # two moves ending in one token
    assert _move_tokens({"move_spans": [[0, 1], [1, 2]], "move_distances": [3, 2]}, [2, 4], 10) == ([], [])
    # a span past the text, and a turn whose text did not decode token by token
    assert _move_tokens({"move_spans": [[0, 5]], "move_distances": [3]}, [2, 4], 10) == ([], [])
    assert _move_tokens({"move_spans": [[0, 1]], "move_distances": [3]}, None, 10) == ([], [])
    assert _move_tokens({"move_spans": [[0, 1], [3, 4]], "move_distances": [3, None]}, [2, 4], 10) == (
        [10, 11],
        [3, None],
    )


class SplitCharRenderer(CharRenderer):
    """Decodes the ids 200 and 201 together to one character, and either alone to a replacement character."""

    def decode_action(self, sampled_ids):
        text = super().decode_action(sampled_ids).replace(chr(200) + chr(201), "é")
        return text.replace(chr(200), "\ufffd").replace(chr(201), "\ufffd")


def test_token_character_ends_are_trusted_only_where_every_prefix_decodes_to_a_prefix():
    renderer = CharRenderer()
    assert token_char_ends(renderer, [ord("a"), ord("b"), 1], "ab") == [1, 2, 2]  # the stop token adds nothing
    split = SplitCharRenderer()
    assert token_char_ends(split, [ord("a"), 200, 201], "aé") is None
