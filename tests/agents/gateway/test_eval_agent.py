"""``python -m agents.eval env=agent``: the same agent function evaluated through the gateway or any endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.config import EvalConfig, UsageError, compose_eval_config, to_eval_config
from agents.eval import main
from agents.eval_agent import evaluate_program
from agents.gateway import Gateway
from agents.gateway.server import GatewayServer
from agents.models import load_tokenizer

AGENT = str(Path(__file__).resolve().parents[2] / "trainer" / "digits_agent.py")


def _config(*overrides: str) -> EvalConfig:
    return to_eval_config(compose_eval_config(["env=agent", *overrides]))


def test_the_hf_agent_plays_through_the_gateway_and_writes_token_level_records(tmp_path, capsys) -> None:
    out = tmp_path / "eval.jsonl"
    code = main(
        [
            "env=agent",
            f"agent_entry={AGENT}:agent",
            f"agent_tasks={AGENT}:task",
            "model=tiny",
            "episodes=3",
            "progress=false",
            f"out={out}",
        ]
    )
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 and all(r["response_mask"].count(1) > 0 for r in records)
    assert "episodes" in capsys.readouterr().out


async def test_the_same_agent_runs_against_any_openai_compatible_endpoint() -> None:
    from agents.engines.hf import HfEngine
    from agents.models import load_model

    gateway = Gateway(HfEngine(load_model("tiny"), device="cpu", seed=0), load_tokenizer("tiny"))
    async with GatewayServer(gateway) as server:  # stands for any endpoint: the agent is called without sessions
        config = _config(
            f"agent_entry={AGENT}:agent",
            f"agent_tasks={AGENT}:task",
            "agent=openai",
            f"base_url={server.url}/v1",
            "episodes=4",
        )
        episodes, records, _ = await evaluate_program(config)
    assert [r.seed for r in records] == [0, 1, 2, 3] and all(r.termination == "terminated" for r in records)
    assert all(0.0 <= r.episode_return <= 2.0 for r in episodes)
    assert gateway.stats.requests == 8 and gateway.sessions == {}


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ([f"agent_entry={AGENT}:nothing"], "has no attribute 'nothing'"),
        ([f"agent_entry={AGENT}:agent", "agent=openai"], "needs base_url"),
        ([f"agent_entry={AGENT}:agent", "agent=oracle"], "use agent=hf, sglang or openai"),
        ([], "exactly one"),
    ],
)
async def test_bad_agent_settings_are_refused_with_the_fix(overrides, words) -> None:
    with pytest.raises(UsageError, match=words):
        await evaluate_program(_config("model=tiny", *overrides))
