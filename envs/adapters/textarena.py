"""TextArena games as turngym environments: any single-player game, and two-player games against a fixed opponent.

TextArena (``pip install textarena==0.7.4``, pinned) ships about a hundred text games. One game
configuration (``game="Wordle-v0"``, ``"TicTacToe-v0"``, ...) becomes one :class:`TextArenaEnv`:

* Players. Our agent is ``player_id`` (0 by default). In a two-player game the other player is a
  fixed opponent stepped inside our ``step``: ``"random"`` (a random move among those the game
  accepts), ``"first"`` (the first accepted move), or any callable ``str -> str`` that receives the
  opponent's whole history as text (TextArena's usual agent signature). The built-in opponents take
  their moves from the bracketed tokens the game mentions (``Available Moves: '[4]', '[5]'``), each
  tried on a copy of the game; where the game lists none they send the first token they saw, or
  ``[pass]``, and the game's own invalid-move rules apply. Games for three or more players are refused.
* Observations. TextArena's messages for our player since our last move, one line each
  (``[GAME] ...``, ``[Player 1] ...``); our own move is not echoed (it is the assistant message). The
  first observation holds the game's rules and board; the end of the game adds its reason.
* Actions. The model's text goes to the game as it is, except that with ``bracket_actions`` (the
  default, as TextArena's ``ActionFormattingWrapper``) a text without ``[`` or ``]`` is wrapped in
  brackets. A move the game rejects is an invalid action: ``format_penalty`` is subtracted and
  ``info["action_is_valid"]`` is False; the game's rules decide what follows (usually one more try,
  then the game is lost).
* Rewards, TextArena's convention, given at the final step (0 before, apart from format penalties):
  two-player games +1 win, -1 loss (a forfeit by invalid moves included), 0 draw; single-player games
  1 when solved, a fraction in [0, 1) for partial progress at the end, -1 for a forfeit.
  ``success``: single-player, our reward >= 1; two-player, our reward above the opponent's.
* Episode end. ``terminated`` when the game is over (TextArena's own turn limits included: they end
  the game with a score); ``truncated`` after ``max_turns`` of our moves.
* Offline. The game is built and reset once at construction: a game that needs NLTK data that is not
  installed, an API key or the internet raises :class:`UnavailableOfflineError` with the reason; one
  that cannot run here for another reason (3+ players, Python 3.12 syntax, files missing from the
  release) raises :class:`UnavailableGameError`. ``scripts/textarena_offline_games.py`` writes the
  list of games that play offline to ``envs/adapters/data/textarena_offline.json``.
* Randomness. Each reset draws the game's seed from ``self.np_random``; the game's draws from Python's
  global ``random`` happen on a private state (:class:`envs.adapters.textarena_games.GameRandom`).
* Oracle: for the games listed in :data:`envs.adapters.textarena_games.GAME_ORACLES` (GuessTheNumber reads the
  hidden number); ``valid_actions``: the moves the game accepts now, where they can be found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from envs.adapters.textarena_games import (
    GAME_MOVES,
    GAME_ORACLES,
    GameRandom,
    UnavailableGameError,
    UnavailableOfflineError,
    accepted_moves,
    bracket_candidates,
    format_messages,
    load_game,
    made_invalid_move,
    make_game,
)
from envs.core import StepOutcome, TextEnv

__all__ = ["OPPONENTS", "TextArenaEnv", "UnavailableGameError", "UnavailableOfflineError"]

OPPONENTS = ("random", "first")
_MAX_OPPONENT_MOVES_PER_TURN = 1000  # invalid retries included; a game past this is broken


class TextArenaEnv(TextEnv):
    """A TextArena game (single-player, or two-player against a fixed opponent) as a turngym environment.

    Args:
        game: a TextArena game id, e.g. ``"GuessTheNumber-v0"``, ``"TicTacToe-v0"``, ``"Wordle-v0"``.
        opponent: ``"random"``, ``"first"`` or a callable ``str -> str`` (module docstring); unused in
            single-player games.
        player_id: which player our agent is in a two-player game (0 or 1).
        max_turns: our moves per episode before truncation (``None``: the game's own limits only).
        format_penalty: subtracted from the reward of a move the game rejects.
        bracket_actions: wrap an action without ``[`` or ``]`` in brackets before the game reads it.
        max_candidates: moves tried on a copy of the game when looking for accepted moves.
        max_message_chars: a game message longer than this is cut in the observation.
        render_mode: ``"ansi"`` or ``None``.

    Info keys besides the standard ones: ``game``, ``player_id``, ``opponent_moves`` (the opponent's
    moves since our last one) and, at the end, ``textarena_rewards`` and ``reason``.
    """

    def __init__(
        self,
        *,
        game: str = "GuessTheNumber-v0",
        opponent: str | Callable[[str], str] = "random",
        player_id: int = 0,
        max_turns: int | None = 100,
        format_penalty: float = 0.1,
        bracket_actions: bool = True,
        max_candidates: int = 32,
        max_message_chars: int = 4000,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if not callable(opponent) and opponent not in OPPONENTS:
            raise ValueError(f"opponent must be one of {OPPONENTS} or a callable str -> str, got {opponent!r}")
        if max_candidates < 1 or max_message_chars < 1:
            raise ValueError("max_candidates and max_message_chars must be positive")
        self.game_id = str(game)
        self.opponent = opponent
        self.bracket_actions = bool(bracket_actions)
        self.max_candidates = int(max_candidates)
        self.max_message_chars = int(max_message_chars)
        self._random = GameRandom(0)
        loaded = load_game(self.game_id, self._random)  # raises UnavailableOfflineError / UnavailableGameError
        self.num_players = loaded.num_players
        if player_id not in range(self.num_players):
            raise ValueError(
                f"{self.game_id} has {self.num_players} player(s); player_id must be < that, got {player_id}"
            )
        self.player_id = int(player_id)
        self.instructions = _instructions(self.game_id, self.player_id, self.num_players)
        self.action_format = "[move], e.g. [4]"
        self._game: Any = None
        self._histories: dict[int, list[str]] = {}
        self._last_observation = ""

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        seed = int(self.np_random.integers(2**31 - 1))
        self._random = GameRandom(seed)
        with self._random.active():
            self._game = make_game(self.game_id)
            self._game.reset(num_players=self.num_players, seed=seed)
        self._histories = {pid: [] for pid in range(self.num_players)}
        opponent_moves = self._play_opponents()
        observation = self._observe()
        return observation, {"game": self.game_id, "player_id": self.player_id, "opponent_moves": opponent_moves}

    def _step(self, action: str) -> StepOutcome:
        state = self._game.state
        move = f"[{action}]" if self.bracket_actions and "[" not in action and "]" not in action else action
        before = int(getattr(state, "error_count", 0))
        try:
            with self._random.active():
                self._game.step(move)
        except Exception as exc:  # a game that crashes on odd text: an invalid move, not a crash of ours
            self._game.state.add_observation(
                message=f"The game could not read this move ({type(exc).__name__}).", observation_type=_admin()
            )
            invalid = True
        else:
            invalid = made_invalid_move(self._game.state, self.player_id, before)
        opponent_moves = self._play_opponents()
        done = bool(self._game.state.done)
        observation = self._observe()
        reward, success, extra = 0.0, False, {"game": self.game_id, "player_id": self.player_id}
        extra["opponent_moves"] = opponent_moves
        if done:
            reward, success, final = self._outcome()
            extra.update(final)
        return StepOutcome(
            observation, reward=reward, terminated=done, success=success, action_is_valid=not invalid, extra_info=extra
        )

    def render_text(self, color: bool = False) -> str:
        header = f"TextArena {self.game_id}, player {self.player_id}, turn {self.turn}"
        if color:
            header = f"\x1b[1m{header}\x1b[0m"
        board = ""
        if self._game is not None and hasattr(self._game, "get_board_str"):
            try:
                with self._random.trial():
                    board = str(self._game.get_board_str())
            except Exception:  # some games' boards need state a fresh reset lacks; fall back to the text
                board = ""
        return f"{header}\n{board or self._last_observation}"

    def oracle(self) -> list[str] | None:
        if self.episode_over:
            return [] if self._game is not None else None
        solve = GAME_ORACLES.get(type(self._game).__name__)
        return solve(self._game) if solve is not None else None

    def valid_actions(self) -> list[str] | None:
        if self._game is None or self.episode_over:
            return None
        moves = GAME_MOVES.get(type(self._game).__name__)
        if moves is not None:
            return moves(self._game) or None
        candidates = bracket_candidates(self._histories[self.player_id])
        return accepted_moves(self._game, self._random, candidates, limit=self.max_candidates) or None

    # ----------------------------------------------------------------------------------------------
    # The game
    # ----------------------------------------------------------------------------------------------
    def _drain(self, player_id: int) -> str:
        """The messages for ``player_id`` since it last looked, as text (TextArena clears them when read)."""
        state = self._game.state
        messages = state.observations.get(player_id, [])
        state.observations[player_id] = []
        text = format_messages(messages, state.role_mapping, skip_from=player_id, max_chars=self.max_message_chars)
        self._histories.setdefault(player_id, []).append(text)
        return text

    def _observe(self) -> str:
        text = self._drain(self.player_id)
        state = self._game.state
        if state.done:
            reason = state.game_info.get(self.player_id, {}).get("reason")
            text = f"{text}\n[GAME] Game over. {reason}" if reason else f"{text}\n[GAME] Game over."
        self._last_observation = text.strip() or "[GAME] (no new messages)"
        return self._last_observation

    def _play_opponents(self) -> list[str]:
        """Step the opponent until it is our turn or the game is over; return its moves."""
        moves: list[str] = []
        state = self._game.state
        while not state.done and state.current_player_id != self.player_id:
            if len(moves) >= _MAX_OPPONENT_MOVES_PER_TURN:
                raise RuntimeError(f"{self.game_id}: the opponent moved {len(moves)} times without ending its turn")
            opponent_id = state.current_player_id
            self._drain(opponent_id)
            move = self._opponent_move(opponent_id)
            with self._random.active():
                self._game.step(move)
            moves.append(move)
            state = self._game.state
        return moves

    def _opponent_move(self, opponent_id: int) -> str:
        history = self._histories.setdefault(opponent_id, [])
        if callable(self.opponent):
            return str(self.opponent("\n".join(history)))
        known = GAME_MOVES.get(type(self._game).__name__)
        candidates = known(self._game) if known is not None else bracket_candidates(history)
        if self.opponent == "random":
            candidates = [candidates[i] for i in self.np_random.permutation(len(candidates))]
        accepted = accepted_moves(self._game, self._random, candidates, limit=self.max_candidates, stop_at_first=True)
        if accepted:
            return accepted[0]
        return candidates[0] if candidates else "[pass]"

    def _outcome(self) -> tuple[float, bool, dict[str, Any]]:
        state = self._game.state
        rewards = {int(pid): _as_reward(r) for pid, r in (state.rewards or {}).items()}
        reward = rewards.get(self.player_id, 0.0)
        others = [r for pid, r in rewards.items() if pid != self.player_id]
        success = reward >= 1.0 if self.num_players == 1 else bool(others) and reward > max(others)
        reason = state.game_info.get(self.player_id, {}).get("reason")
        final = {"textarena_rewards": {str(pid): r for pid, r in rewards.items()}, "reason": str(reason or "")}
        return reward, success, final


def _as_reward(value: Any) -> float:
    """A player's final reward; a few games record their invalid-move reason in its place (a forfeit: -1)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return -1.0


def _admin() -> Any:
    from textarena.core import ObservationType

    return ObservationType.GAME_ADMIN


def _instructions(game_id: str, player_id: int, num_players: int) -> str:
    opponent = "" if num_players == 1 else " against a fixed opponent (the other player)"
    return (
        f"You are playing the TextArena game {game_id} as Player {player_id}{opponent}.\n"
        "The game's messages come as user messages: first its rules, then the board and the moves. "
        "Reply with your move in the format the rules ask for, usually in square brackets, e.g. [4]. "
        "A move the game rejects costs a penalty; repeated invalid moves lose the game."
    )
