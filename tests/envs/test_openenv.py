"""OpenEnv interop, with the real openenv package (0.4.1) on localhost.

* OpenEnv's own client (``GenericEnvClient``) against turngym's server (``envs.adapters.openenv_server``).
* turngym's client env (``envs.make("openenv")``) against a server built with OpenEnv's own
  ``Environment`` / ``create_app`` (a number-guessing game defined here, with a structured action).
* The round trip: turngym environments served by turngym's server and played by turngym's client
  with the oracle reach success, with the rewards of the same episode played in-process.
* Faults: a server that is not there, a server that goes away mid-episode, malformed actions.

Without openenv these tests fail (not skip) with the install command.
"""

from __future__ import annotations

import concurrent.futures
import socket

import pytest
import requests

import envs
from envs.adapters.openenv_server import OPENENV_INSTALL, local_server, serve_app, start_server

try:
    from openenv.core import GenericEnvClient
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
except ImportError as exc:  # fail loudly in CI: the adapter is part of the suite
    raise ImportError(f"tests/envs/test_openenv.py needs openenv: {OPENENV_INSTALL}") from exc


@pytest.fixture(scope="module")
def sokoban_url() -> str:
    return local_server("sokoban").url  # the server envs.make("openenv") uses too: started once per process


def play_in_process(env_id: str, seed: int, **options) -> list[tuple[str, float, bool]]:
    """(action, reward, done) per turn of the oracle's episode, played directly on the turngym env."""
    env = envs.make(env_id, **options)
    env.reset(seed=seed)
    turns = []
    while not env.episode_over:
        action = env.oracle()[0]
        _, reward, terminated, truncated, _ = env.step(action)
        turns.append((action, reward, terminated or truncated))
    return turns


# --------------------------------------------------------------------------------------------------
# OpenEnv's client against turngym's server
# --------------------------------------------------------------------------------------------------
def test_openenv_client_plays_turngym_sokoban_to_success(sokoban_url):
    with GenericEnvClient(base_url=sokoban_url).sync() as client:
        result = client.reset(seed=0)
        assert result.observation["text"] == envs.make("sokoban").reset(seed=0)[0]
        assert result.observation["instructions"].startswith("You are playing Sokoban")
        assert (result.reward, result.done) == (None, False)
        turns = []
        while not result.done:
            action = client.state()["oracle"][0]
            result = client.step({"text": action})
            turns.append((action, result.reward, result.done))
        assert result.observation["success"] and result.observation["terminated"]
    # seed 0: 5 moves (-0.5), then 4 moves pushing the box onto its target: -0.4 + 1 + 10 = 10.6
    expected = [("Right || Up || Right || Right || Down", -0.5, False), ("Left || Up || Left || Down", 10.6, True)]
    assert turns == play_in_process("sokoban", 0) == expected


def test_invalid_text_is_a_penalised_step_and_malformed_messages_are_server_errors(sokoban_url):
    with GenericEnvClient(base_url=sokoban_url).sync() as client:
        client.reset(seed=0)
        result = client.step({"text": "jump"})
        # Sokoban's default format penalty, 1.0: more than any valid turn's moves cost.
        assert (result.reward, result.done, result.observation["action_is_valid"]) == (-1.0, False, False)
        assert result.metadata["invalid_reason"] == "'jump' is not an action"
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"txt": "Up"})  # not the action schema: OpenEnv's validation answers, the session lives on
        assert client.step({"text": "Up"}).observation["turn"] == 2


def test_concurrent_sessions_get_independent_environments(sokoban_url):
    def play(seed: int) -> list:
        with GenericEnvClient(base_url=sokoban_url).sync() as client:
            result, turns = client.reset(seed=seed), []
            while not result.done:
                action = client.state()["oracle"][0]
                result = client.step({"text": action})
                turns.append((action, result.reward, result.done))
            return turns

    seeds = list(range(8))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        played = list(pool.map(play, seeds))
    assert played == [play_in_process("sokoban", seed) for seed in seeds]
    # interleaved sessions on one server: each keeps its own board
    with GenericEnvClient(base_url=sokoban_url).sync() as a, GenericEnvClient(base_url=sokoban_url).sync() as b:
        first_a, first_b = a.reset(seed=1).observation["text"], b.reset(seed=2).observation["text"]
        a.step({"text": "Up"})
        assert b.state()["render"] + "\n" in first_b + "\n" and b.state()["turn"] == 0
        assert a.state()["turn"] == 1 and first_a != first_b


def test_schema_metadata_and_health_over_http(sokoban_url):
    schema = requests.get(f"{sokoban_url}/schema", timeout=10).json()
    assert schema["action"]["required"] == ["text"]
    fields = set(schema["observation"]["properties"])
    assert {"text", "terminated", "truncated", "success", "action_is_valid"} <= fields
    metadata = requests.get(f"{sokoban_url}/metadata", timeout=10).json()
    assert metadata["name"] == "sokoban" and metadata["version"] == "turngym"
    assert requests.get(f"{sokoban_url}/health", timeout=10).json()["status"] == "healthy"


# --------------------------------------------------------------------------------------------------
# The round trip: turngym's server, turngym's client
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("env_id", "seed"), [("sokoban", 0), ("sokoban", 7), ("frozenlake", 3), ("toolcall", 2)])
def test_round_trip_oracle_reaches_success_with_in_process_rewards(env_id, seed):
    env = envs.make("openenv", serve=env_id)
    direct = envs.make(env_id)
    observation, info = env.reset(seed=seed)
    direct_observation, direct_info = direct.reset(seed=seed)
    assert observation == direct_observation and env.instructions == direct.instructions
    assert env.tools == direct.tools and env.spec.id == "turngym/OpenEnv-v0"
    turns, states = [], [state_of(info)]
    while not env.episode_over:
        action = env.oracle()[0]
        _, reward, terminated, truncated, info = env.step(action)
        turns.append((action, reward, terminated or truncated))
        states.append(state_of(info))
    assert info["success"] and turns == play_in_process(env_id, seed)
    direct_states = [state_of(direct_info)]
    for action, _, _ in turns:
        direct_states.append(state_of(direct.step(action)[-1]))
    assert env.messages() == direct.messages()  # the same conversation, tool messages included
    assert states == direct_states  # the optional state information travels in the metadata
    assert (states[0][1] is not None) == (env_id != "toolcall") and states[-1][1] in (0, None)
    env.close()


def state_of(info: dict) -> tuple:
    return info.get("state_key"), info.get("distance_to_goal")


def test_tool_results_keep_their_role_through_the_server():
    env, direct = envs.make("openenv", serve="toolcall"), envs.make("toolcall")
    env.reset(seed=2)
    direct.reset(seed=2)
    action = env.oracle()[0]
    env.step(action)
    direct.step(action)
    assert env.observation_messages() == direct.observation_messages()
    assert {m["role"] for m in env.observation_messages()} == {"tool"}


def test_client_options_format_penalty_once_and_truncation(sokoban_url):
    env = envs.make("openenv", base_url=sokoban_url, max_turns=2)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("jump")
    assert (reward, info["action_is_valid"], info["invalid_reason"]) == (-1.0, False, "'jump' is not an action")
    _, reward, terminated, truncated, _ = env.step("Up")
    assert (reward, terminated, truncated) == (-0.1, False, True)  # turngym's max_turns=2 on top of the server's


# --------------------------------------------------------------------------------------------------
# turngym's client against a server built with OpenEnv's own classes
# --------------------------------------------------------------------------------------------------
class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    message: str
    attempts: int


class GuessEnvironment(Environment):
    """Guess 37 in at most 4 attempts; reward 1 for the right guess; guesses outside 1..100 raise."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.attempts = 0

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.attempts = 0
        return GuessObservation(message="Guess a number from 1 to 100.", attempts=0)

    def step(self, action, timeout_s=None, **kwargs):
        if not 1 <= action.guess <= 100:
            raise ValueError(f"{action.guess} is outside 1..100")
        self.attempts += 1
        if action.guess == 37:
            return GuessObservation(message="Correct!", attempts=self.attempts, done=True, reward=1.0)
        hint = "higher" if action.guess < 37 else "lower"
        return GuessObservation(message=f"Go {hint}.", attempts=self.attempts, done=self.attempts >= 4, reward=0.0)

    @property
    def state(self):
        return State(step_count=self.attempts)


@pytest.fixture(scope="module")
def guess_url():
    app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=8)
    server = serve_app(app, name="guess")
    yield server.url
    server.stop()


def test_structured_actions_from_text_against_an_openenv_server(guess_url):
    env = envs.make("openenv", base_url=guess_url, success_threshold=1.0, format_penalty=0.25)
    observation, info = env.reset(seed=0)
    assert observation == "message: Guess a number from 1 to 100.\nattempts: 0"
    assert '"guess"' in env.action_format and "JSON schema" in env.instructions and env.oracle() is None
    steps = [
        env.step("50"),  # a bare value for the only field
        env.step('I think\n```json\n{"guess": 30}\n```'),  # a fenced JSON object
        env.step("hmm, maybe a lot"),  # no JSON: not sent, penalised
        env.step('{"guess": "thirty"}'),  # fails the action schema: not sent, penalised
        env.step('{"guess": 500}'),  # valid for the schema, the server raises: penalised, nothing counted
        env.step('Final: {"guess": 37}'),
    ]
    assert [s[0].splitlines()[0] for s in steps[:2]] == ["message: Go lower.", "message: Go higher."]
    assert [s[1] for s in steps] == [0.0, 0.0, -0.25, -0.25, -0.25, 1.0]
    assert [s[4]["action_is_valid"] for s in steps] == [True, True, False, False, False, True]
    assert steps[2][4]["format_error"] == "no JSON object found in the answer"
    assert steps[3][4]["format_error"].startswith("guess: 'thirty' is not of type 'integer'")
    assert "500 is outside 1..100" in steps[4][4]["format_error"]
    assert steps[-1][0] == "message: Correct!\nattempts: 3"  # the rejected texts never reached the game
    assert (steps[-1][2], steps[-1][3], steps[-1][4]["success"]) == (True, False, True)


def test_observation_field_and_check_env(guess_url):
    from gymnasium.utils.env_checker import check_env

    env = envs.make("openenv", base_url=guess_url, observation_field="message")
    assert env.reset(seed=0)[0] == "Guess a number from 1 to 100."
    check_env(env)


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_server_is_a_clear_connection_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match=f"no OpenEnv server answers at {url}/schema"):
        envs.make("openenv", base_url=url)
    with pytest.raises(ValueError, match="not both"):
        envs.make("openenv", base_url=url, image="some-image")


@pytest.mark.docker
def test_missing_docker_image_is_a_clear_error_and_leaves_no_container():
    import os
    import subprocess

    from sandbox.docker_backend import docker_daemon_answers

    if not docker_daemon_answers():  # as tests/sandbox/conftest.py: a skip locally, a failure in CI
        message = "no Docker daemon answers: start one with `dockerd --bridge=none --iptables=false &` (root)"
        pytest.fail(message) if os.environ.get("CI", "").lower() == "true" else pytest.skip(message)
    with pytest.raises(RuntimeError, match="docker run turngym-no-such-image:latest failed"):
        envs.make("openenv", image="turngym-no-such-image:latest")
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", "name=turngym-no-such-image"], capture_output=True)
    assert listed.returncode == 0 and listed.stdout.strip() == b""


def test_server_gone_mid_episode_raises_connection_error():
    server = start_server("frozenlake")
    env = envs.make("openenv", base_url=server.url, message_timeout_s=5.0)
    env.reset(seed=0)
    server.stop()
    with pytest.raises(ConnectionError, match="OpenEnv"):
        env.step("Up")


# --------------------------------------------------------------------------------------------------
# python -m envs.serve
# --------------------------------------------------------------------------------------------------
def test_serve_arguments():
    from envs.serve import parse_args

    assert parse_args(["sokoban", "env.dim=[7, 8]", "env.require_answer_tag=true", "port=8001"]) == (
        "sokoban",
        {"dim": [7, 8], "require_answer_tag": True},
        {"host": "127.0.0.1", "port": 8001, "max_sessions": 256, "api_key": None},
    )
    with pytest.raises(SystemExit, match="unknown option 'prot'"):
        parse_args(["sokoban", "prot=8001"])
    with pytest.raises(SystemExit, match="options look like"):
        parse_args(["sokoban", "dim"])
    with pytest.raises(SystemExit, match=r"python -m envs\.serve <env id>"):
        parse_args([])


@pytest.mark.slow
def test_serve_cli_serves_a_registered_env_to_openenv_clients():
    import subprocess
    import sys
    import time

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "envs.serve", "frozenlake", "env.size=5", f"port={port}"])
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                    break
            except requests.RequestException:
                assert time.monotonic() < deadline and server.poll() is None, "envs.serve did not start"
                time.sleep(0.5)
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
            result = client.reset(seed=4)
            assert result.observation["text"] == envs.make("frozenlake", size=5).reset(seed=4)[0]
            while not result.done:
                result = client.step({"text": client.state()["oracle"][0]})
            assert result.observation["success"] and result.reward == 1.0
    finally:
        server.terminate()
        server.wait(30)
    bad = subprocess.run(
        [sys.executable, "-m", "envs.serve", "frozenlake", "env.sise=5"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "did you mean 'size'" in bad.stderr
