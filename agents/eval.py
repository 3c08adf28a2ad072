"""``python -m agents.eval``: evaluate an agent on an environment and print a table.

:data:`USAGE` is the reference for users. Episodes run concurrently through the same episode loop
as training (:mod:`agents.episode`); each trajectory is appended to the output JSONL as soon as it
finishes, so an interrupted evaluation keeps what it played. :func:`summarize` computes the table
from trajectories (also usable on a JSONL file written earlier, with ``--summarize FILE``).
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from agents.config import EvalConfig
    from agents.trajectory import Trajectory

__all__ = ["USAGE", "EvalSummary", "evaluate", "main", "summarize"]

USAGE = """\
usage: python -m agents.eval env=<id> [key=value ...]
       python -m agents.eval --cfg env=<id> [key=value ...]    print the composed config and exit
       python -m agents.eval --summarize FILE.jsonl             the table of trajectories written earlier

Evaluate an agent on a turngym environment: play `episodes` episodes (seeds seed, seed+1, ...),
print success rate, return, turns, invalid-action rate and tokens, and write every trajectory to a
JSONL file. Options are Hydra overrides of configs/eval.yaml:
  env=<id>             configs/env/<id>.yaml, or any registered environment id (plugins too)
  env.<option>=<v>     an option of the environment, e.g. env.dim=8
  agent=hf             hf (embedded engine; alias llm) | sglang | openai | oracle | random
  env=agent agent_entry=<file.py:function> [agent_tasks=<file.py:function>]
                       evaluate an agent program (async def agent(client, task) -> reward) instead of
                       an environment: agent=openai base_url=... calls that endpoint directly; agent=hf
                       runs it through the recording gateway (token-level trajectories)
  model=smollm2        smollm2 (embedded SmolLM2-135M-Instruct) | tiny | a Hugging Face model dir;
                       for openai the model name the endpoint serves
  base_url=null        openai: an OpenAI-compatible URL (.../v1); sglang: http://host:port[,http://...]
  api_key_env=OPENAI_API_KEY   the environment variable holding the API key (openai)
  episodes=32 seed=0 concurrency=16
  temperature=0.7 top_p=1.0 max_new_tokens=256 max_total_tokens=4096 max_turns=null
  device=auto dtype=auto   the hf engine's device and weights
  out=null             trajectories JSONL; null: runs/eval/<env id>-<agent>-<time>.jsonl
  progress=true

Examples:
  python -m agents.eval env=sokoban agent=hf episodes=16
  python -m agents.eval env=frozenlake agent=oracle episodes=100
  python -m agents.eval env=sokoban agent=openai base_url=http://localhost:8000/v1 model=my-model
"""


@dataclass(frozen=True)
class EvalSummary:
    """The evaluation table's numbers. Rates are fractions; ``*_stderr`` are standard errors of the mean."""

    episodes: int
    success_rate: float
    success_stderr: float
    mean_return: float
    return_stderr: float
    mean_turns: float
    invalid_action_rate: float  # invalid actions / turns
    mean_sampled_tokens: float  # model tokens per episode
    mean_total_tokens: float  # prompt + response tokens per episode
    errors: int
    max_tokens: int  # episodes ended by the context budget
    truncated: int
    #: Success by difficulty bucket, for envs that report the solver's distance at reset
    #: (``Trajectory.initial_distance``): (bucket, success rate, episodes), easiest first.
    by_difficulty: tuple[tuple[str, float, int], ...] = ()
    #: Of the failed episodes whose env reported the distance after every turn: those left where the solver finds
    #: no solution (a box pushed into a deadlock, a fall into a hole, or beyond the solver's budget), and those
    #: left in a solvable position (out of turns or tokens). ``None`` where the env reports no distance.
    failed_lost: int | None = None
    failed_solvable: int | None = None

    def rows(self) -> list[tuple[str, str]]:
        buckets = [(f"success, {name} optimal moves", f"{rate:.1%} of {n}") for name, rate, n in self.by_difficulty]
        if self.failed_lost is not None:
            buckets.append(("failures: no solution left / solvable", f"{self.failed_lost} / {self.failed_solvable}"))
        return [
            ("episodes", f"{self.episodes}"),
            ("success rate", f"{self.success_rate:.1%} ± {self.success_stderr:.1%}"),
            ("mean return", f"{self.mean_return:.3f} ± {self.return_stderr:.3f}"),
            ("mean turns", f"{self.mean_turns:.2f}"),
            ("invalid-action rate", f"{self.invalid_action_rate:.1%}"),
            ("sampled tokens / episode", f"{self.mean_sampled_tokens:.1f}"),
            ("total tokens / episode", f"{self.mean_total_tokens:.1f}"),
            ("truncated / max_tokens / error", f"{self.truncated} / {self.max_tokens} / {self.errors}"),
            *buckets,
        ]


def _mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = math.fsum(values) / n
    if n == 1:
        return mean, 0.0
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def summarize(trajectories: Sequence[Trajectory]) -> EvalSummary:
    """The table over ``trajectories``; episodes that ended in an error count as failures with their return."""
    success_rate, success_stderr = _mean_and_stderr([float(t.success) for t in trajectories])
    mean_return, return_stderr = _mean_and_stderr([t.episode_return for t in trajectories])
    n = max(len(trajectories), 1)
    turns = sum(t.num_turns for t in trajectories)
    return EvalSummary(
        episodes=len(trajectories),
        success_rate=success_rate,
        success_stderr=success_stderr,
        mean_return=mean_return,
        return_stderr=return_stderr,
        mean_turns=turns / n,
        invalid_action_rate=sum(t.num_invalid_actions for t in trajectories) / turns if turns else 0.0,
        mean_sampled_tokens=sum(t.num_sampled_tokens for t in trajectories) / n,
        mean_total_tokens=sum(t.num_tokens for t in trajectories) / n,
        errors=sum(t.termination == "error" for t in trajectories),
        max_tokens=sum(t.termination == "max_tokens" for t in trajectories),
        truncated=sum(t.termination == "truncated" for t in trajectories),
        by_difficulty=success_by_difficulty(trajectories),
        **failure_kinds(trajectories),
    )


DIFFICULTY_BUCKET_WIDTH = 3  # optimal moves per bucket: 1-3, 4-6, 7-9, ...


def difficulty_bucket(distance: int) -> str:
    """The bucket of a level whose optimal solution takes ``distance`` moves: ``"1-3"``, ``"4-6"``, ..."""
    low = (max(int(distance), 1) - 1) // DIFFICULTY_BUCKET_WIDTH * DIFFICULTY_BUCKET_WIDTH + 1
    return f"{low}-{low + DIFFICULTY_BUCKET_WIDTH - 1}"


def success_by_difficulty(trajectories: Sequence[Trajectory]) -> tuple[tuple[str, float, int], ...]:
    """(bucket, success rate, episodes) over the episodes whose env reported the start's distance, easiest first."""
    buckets: dict[str, list[bool]] = {}
    for t in trajectories:
        if t.initial_distance is not None:
            buckets.setdefault(difficulty_bucket(t.initial_distance), []).append(bool(t.success))
    ordered = sorted(buckets.items(), key=lambda item: int(item[0].split("-")[0]))
    return tuple((name, sum(wins) / len(wins), len(wins)) for name, wins in ordered)


def failure_kinds(trajectories: Sequence[Trajectory]) -> dict[str, int | None]:
    """``failed_lost`` and ``failed_solvable`` (:class:`EvalSummary`) over the failed episodes that have a
    distance per turn; both ``None`` when no episode has one (an env without a solver)."""
    if not any(t.turn_distances_after for t in trajectories):
        return {"failed_lost": None, "failed_solvable": None}
    known = [t for t in trajectories if not t.success and t.turn_distances_after]
    lost = sum(t.turn_distances_after[-1] is None for t in known)
    return {"failed_lost": lost, "failed_solvable": len(known) - lost}


def default_output(config: EvalConfig) -> Path:
    name = str(config.env["id"]).replace("/", "_")
    return Path("runs") / "eval" / f"{name}-{config.agent}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"


async def evaluate(config: EvalConfig, *, stream: Any = None) -> tuple[EvalSummary, list[Trajectory], dict]:
    """Play ``config.episodes`` episodes; returns the summary, the trajectories and engine metrics.

    Progress goes to ``stream`` (default standard error): :class:`agents.eval_progress.EvalProgress`.
    """
    import envs
    from agents.command_config import turn_cap_note
    from agents.config import env_options
    from agents.episode import EpisodeSpec
    from agents.eval_progress import EvalProgress
    from agents.policy import MODEL_KINDS, make_policy
    from agents.preflight import check_agent_model, make_checked_env
    from agents.trajectory import write_trajectories

    env_id, options = config.env["id"], env_options(config)
    if env_id == "agent":  # an agent program instead of an environment (agents.eval_agent)
        return await _evaluate_program(config)
    # Bad options, an impossible configuration or a missing model fail here, before a model loads.
    probe = make_checked_env(env_id, options, seed=config.seed)
    probe.close()
    check_agent_model(config.agent, config.model)
    title = f"{config.episodes} episodes of {env_id}, agent={config.agent}, {config.concurrency} at a time"
    progress = EvalProgress(config.episodes, title, enabled=config.progress, stream=stream)
    if note := turn_cap_note(config.env, config.max_turns, "max_turns"):
        print(f"eval: {note}", file=progress.stream, flush=True)
    if config.agent in MODEL_KINDS and config.progress:
        print(f"eval: loading model={config.model} ...", file=progress.stream, flush=True)
    policy = make_policy(
        config.agent, config, tools=probe.tools, batch_size=config.concurrency, sampling_seed=config.sampling_seed
    )
    out = Path(config.out) if config.out else default_output(config)
    write_trajectories(out, [], append=False)
    semaphore = asyncio.Semaphore(config.concurrency)

    async def one(index: int) -> Trajectory:
        spec = EpisodeSpec(env_id, config.seed + index, group_id=f"eval/{config.seed + index}", env_options=options)
        async with semaphore:
            env = envs.make(env_id, **options)
            try:
                return await policy.play(env, spec)
            finally:
                env.close()

    trajectories: list[Trajectory] = []
    started = time.perf_counter()
    pending: set[asyncio.Future] = set()
    try:
        with progress:
            pending = {asyncio.ensure_future(one(i)) for i in range(config.episodes)}
            while pending:
                wait_s = progress.wait_s
                done, pending = await asyncio.wait(pending, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    trajectory = finished.result()
                    write_trajectories(out, [trajectory])
                    trajectories.append(trajectory)
                    progress.advance(trajectory.success)
                progress.heartbeat()
        engine_metrics = policy.engine.stats().as_metrics() if policy.engine is not None else {}
    finally:
        # Interrupted (SIGTERM, Ctrl-C): the episodes not played yet end here, not as tasks the interpreter
        # destroys at exit with a warning each.
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await policy.close()
    engine_metrics["wall_s"] = time.perf_counter() - started
    engine_metrics["output"] = str(out)
    trajectories.sort(key=lambda t: t.seed)
    return summarize(trajectories), trajectories, engine_metrics


async def _evaluate_program(config: EvalConfig) -> tuple[EvalSummary, list[Trajectory], dict]:
    from agents.eval_agent import evaluate_program
    from agents.preflight import check_agent_model
    from agents.trajectory import write_trajectories

    check_agent_model(config.agent, config.model)
    started = time.perf_counter()
    episodes, records, metrics = await evaluate_program(config)
    out = Path(config.out) if config.out else default_output(config)
    write_trajectories(out, records, append=False)
    metrics["wall_s"] = time.perf_counter() - started
    metrics["output"] = str(out)
    return summarize(episodes), episodes, metrics


def print_table(summary: EvalSummary, title: str, extra: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in summary.rows():
        table.add_row(name, value)
    if "engine/prefix_hit_rate" in extra and extra.get("engine/prompt_tokens"):
        table.add_row("prefix-cache hit rate", f"{extra['engine/prefix_hit_rate']:.1%}")
        table.add_row("generated tokens / s", f"{extra['engine/generated_tokens_per_s']:.1f}")
    if "wall_s" in extra:
        table.add_row("wall time", f"{extra['wall_s']:.1f} s")
    (console or Console()).print(table)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m agents.eval``; returns the exit code.

    The preamble is :func:`agents.cli.run_command`'s, plus ``--summarize FILE``. Bad options and a missing
    optional package exit 2; a model that does not load or an output file that cannot be written exit 1.
    """
    from agents.cli import run_command

    return run_command(
        USAGE,
        _compose,
        _evaluate_and_print,
        argv,
        usage_errors=(ValueError, ImportError),
        failures=(OSError,),
        modes={"--summarize": _summarize_file},
    )


def _compose(overrides: list[str]) -> DictConfig:
    from agents.config import compose_eval_config

    return compose_eval_config(overrides)


def _evaluate_and_print(cfg: DictConfig) -> int:
    """Evaluate, then print the table and where the trajectories are."""
    from agents.config import to_eval_config
    from agents.policy import SCRIPTED_KINDS

    config = to_eval_config(cfg)
    summary, _, extra = asyncio.run(evaluate(config))
    model = "" if config.agent in SCRIPTED_KINDS else f" · model={config.model}"
    print_table(summary, f"{config.env['id']} · agent={config.agent}{model}", extra)
    print(f"trajectories: {extra['output']}")
    return 0


def _summarize_file(paths: list[str]) -> int:
    from agents.cli import print_error
    from agents.trajectory import read_trajectories

    if len(paths) != 1:
        return print_error("--summarize takes one JSONL file")
    try:
        trajectories = list(read_trajectories(paths[0]))
    except (OSError, ValueError) as exc:
        return print_error(exc)
    print_table(summarize(trajectories), paths[0], {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
