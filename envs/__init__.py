"""turngym environments: the text-environment contract, the registry and the built-in environments.

    import envs
    env = envs.make("sokoban", dim=8, num_boxes=2)
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("<answer>Up || Left</answer>")

``gymnasium.make("turngym/Sokoban-v0")`` works too once this package is imported (or with
``gymnasium.make("envs:turngym/Sokoban-v0")``, which imports it). Third-party environments register
through the entry-point group ``turngym.envs`` (see :mod:`envs.registry`).
"""

from envs.core import Message, StepOutcome, TextEnv, TextSpace
from envs.registry import (
    EnvSpec,
    UnknownEnvironmentError,
    ids,
    list_specs,
    load_plugins,
    make,
    plugin_errors,
    register,
    spec,
    unregister,
)

__all__ = [
    "EnvSpec",
    "Message",
    "StepOutcome",
    "TextEnv",
    "TextSpace",
    "UnknownEnvironmentError",
    "ids",
    "list_specs",
    "load_plugins",
    "make",
    "plugin_errors",
    "register",
    "spec",
    "unregister",
]


def _register_builtins() -> None:
    # String entry points: an environment's module is imported only when it is made.
    register(
        "sokoban",
        "envs.sokoban.env:SokobanEnv",
        gym_id="turngym/Sokoban-v0",
        description="Sokoban, 6x6 with 1 box (RAGEN's 'simple' setting); push every box onto a target",
    )
    register(
        "frozenlake",
        "envs.frozenlake.env:FrozenLakeEnv",
        gym_id="turngym/FrozenLake-v0",
        description="FrozenLake, 4x4 with random start and goal; reach the goal without falling into a hole",
    )
    register(
        "toolcall",
        "envs.toolcall.env:ToolCallEnv",
        gym_id="turngym/ToolCall-v0",
        description="Tool calling over a fictional world: multi-hop questions and stateful jobs, Hermes <tool_call>",
    )
    register(
        "webshop",
        "envs.webshop.env:WebShopEnv",
        gym_id="turngym/WebShop-v0",
        description="WebShop over a generated 4,500-product catalogue; search, browse, choose options and buy",
    )
    register(
        "code",
        "envs.code.env:CodeEnv",
        gym_id="turngym/Code-v0",
        description="Python programming problems judged by sandboxed tests (stdin/stdout, function calls, asserts)",
    )
    register(
        "textarena",
        "envs.adapters.textarena:TextArenaEnv",
        gym_id="turngym/TextArena-v0",
        description="A TextArena game (game=...), alone or against a fixed opponent; needs textarena==0.7.4",
    )
    register(
        "verifiers",
        "envs.adapters.verifiers:VerifiersEnv",
        gym_id="turngym/Verifiers-v0",
        description="A verifiers v1 taskset (taskset=...) played turn by turn, scored by its rewards; verifiers 0.4.0",
    )
    register(
        "openenv",
        "envs.adapters.openenv:OpenEnvEnv",
        gym_id="turngym/OpenEnv-v0",
        description="An OpenEnv server (base_url=... or image=...; default: Sokoban served here); openenv==0.4.1",
    )
    register(
        "reasoning_gym",
        "envs.adapters.reasoning_gym:ReasoningGymEnv",
        gym_id="turngym/ReasoningGym-v0",
        description="A reasoning-gym dataset (dataset=...), one generated question per episode; reasoning-gym==0.1.25",
    )


_register_builtins()
