"""A multi-turn verifiers v1 taskset and env for the adapter's tests (plain id ``v1_countdown``).

Say the numbers from the task's start down to 1, one per turn; the env answers each reply. The task
stops at 1 (a ``@vf.stop``); rewards: ``finished`` 1.0 and ``mistakes`` -0.25 per wrong reply.
"""

from __future__ import annotations

import verifiers.v1 as vf

__all__ = ["CountdownEnv", "CountdownTaskset"]


class CountdownData(vf.TaskData):
    start: int


class CountdownTask(vf.Task[CountdownData, vf.State, vf.TaskConfig]):
    def said(self, trace: vf.Trace) -> list[str]:
        return [m.content.strip() for m in trace.assistant_messages]

    def expected(self, trace: vf.Trace) -> int:
        """The next number to say: each right reply counts down by one."""
        expected = self.data.start
        for said in self.said(trace):
            expected -= said == str(expected)
        return expected

    @vf.stop
    async def reached_zero(self, trace: vf.Trace) -> bool:
        return self.expected(trace) == 0

    @vf.reward
    async def finished(self, trace: vf.Trace) -> float:
        return 1.0 if self.expected(trace) == 0 else 0.0

    @vf.reward(weight=-0.25)
    async def mistakes(self, trace: vf.Trace) -> float:
        return float(len(self.said(trace)) - (self.data.start - self.expected(trace)))


class CountdownTaskset(vf.Taskset[CountdownTask]):
    def load(self):
        for start in (2, 3):
            yield CountdownTask(CountdownData(prompt=f"Count down from {start}.", start=start))


class CountdownEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()
    max_replies: int = 6


class CountdownEnv(vf.Env[CountdownEnvConfig]):
    async def run(self, task, agents):
        async with agents.player.interaction(task) as exchange:
            segment = await exchange.turn()
            for _ in range(self.config.max_replies - 1):
                if segment.terminated:
                    break
                expected = task.expected(exchange.trace)
                heard = segment.last_reply
                reply = f"Good. Next: {expected}" if heard == str(expected + 1) else f"No, say {expected}"
                segment = await exchange.turn(reply)
        exchange.trace.info["replies"] = exchange.trace.num_turns
