"""Loading TextArena games and reading their state: the parts of :class:`envs.adapters.textarena.TextArenaEnv`.

* :func:`import_textarena` imports the pinned TextArena (``pip install textarena==0.7.4``) or raises an
  :class:`ImportError` that names the install command.
* :func:`load_game` builds a game without TextArena's wrappers (turngym formats observations itself),
  resets it once to learn its number of players and raises :class:`UnavailableOfflineError` (the game
  needs NLTK data that is not installed, an API key, or the internet) or :class:`UnavailableGameError`
  (it needs three or more players, is broken in this TextArena release, or fails on this Python).
* :class:`GameRandom`: TextArena games draw from Python's global :mod:`random` and reseed it in
  ``reset``. Every call into a game runs inside ``GameRandom.active()``, which swaps the game's own
  random state in and out of the global one under a lock: games do not disturb each other, nor the
  rest of the process, and the same seed gives the same game whatever else runs.
* :func:`format_messages`, :func:`bracket_candidates` and :func:`made_invalid_move` read TextArena's
  observations (``(from_id, text, ObservationType)`` tuples) and its per-player invalid-move records.
"""

from __future__ import annotations

import contextlib
import copy
import random
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from envs.optional import import_pinned

__all__ = [
    "GAME_MOVES",
    "GAME_ORACLES",
    "TEXTARENA_INSTALL",
    "TEXTARENA_VERSION",
    "GameRandom",
    "LoadedGame",
    "UnavailableGameError",
    "UnavailableOfflineError",
    "accepted_moves",
    "bracket_candidates",
    "classify_failure",
    "format_messages",
    "game_ids",
    "import_textarena",
    "load_game",
    "made_invalid_move",
    "make_game",
]

TEXTARENA_VERSION = "0.7.4"
TEXTARENA_INSTALL = f"pip install textarena=={TEXTARENA_VERSION}"
GAME_ID = -1  # TextArena's sender id of game messages (textarena.GAME_ID)
_CANDIDATE = re.compile(r"\[[^\[\]\n]{1,40}\]")
_RANDOM_LOCK = threading.RLock()


class UnavailableGameError(RuntimeError):
    """A TextArena game that cannot be played here; ``reason`` says why, ``kind`` classifies it."""

    def __init__(self, game: str, kind: str, reason: str) -> None:
        super().__init__(f"TextArena game {game!r} is unavailable ({kind}): {reason}")
        self.game = game
        self.kind = kind
        self.reason = reason


class UnavailableOfflineError(UnavailableGameError):
    """The game needs something from outside this machine: NLTK data, an API key or the internet."""


def import_textarena() -> Any:
    """The ``textarena`` module, or an :class:`ImportError` naming the pinned install command."""
    return import_pinned("textarena", TEXTARENA_VERSION, TEXTARENA_INSTALL, user="the TextArena adapter")


def game_ids() -> list[str]:
    """Every registered TextArena game configuration, without the ``-raw``/``-train`` wrapper variants."""
    from textarena.envs.registration import ENV_REGISTRY

    return [i for i in ENV_REGISTRY if not i.endswith(("-raw", "-train"))]


class GameRandom:
    """A game's private state of Python's global :mod:`random` (module docstring)."""

    def __init__(self, seed: int) -> None:
        self._state = random.Random(seed).getstate()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run the block with this game's random state as the global one; restore the global state after."""
        with _RANDOM_LOCK:
            outside = random.getstate()
            random.setstate(self._state)
            try:
                yield
            finally:
                self._state = random.getstate()
                random.setstate(outside)

    @contextlib.contextmanager
    def trial(self) -> Iterator[None]:
        """Like :meth:`active`, but the game's random state is left as it was (for moves tried on a copy)."""
        with _RANDOM_LOCK:
            outside = random.getstate()
            random.setstate(self._state)
            try:
                yield
            finally:
                random.setstate(outside)


@dataclass
class LoadedGame:
    """A TextArena game without wrappers, reset once, and the number of players it was reset with."""

    game: Any
    num_players: int


def load_game(game_id: str, random_state: GameRandom, seed: int = 0) -> LoadedGame:
    """Build ``game_id``, reset it with 1, else 2 players; raise :class:`UnavailableGameError` if neither works."""
    ta = import_textarena()
    from textarena.envs.registration import ENV_REGISTRY

    if game_id not in ENV_REGISTRY:
        import difflib

        close = difflib.get_close_matches(game_id, game_ids(), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown TextArena game {game_id!r}.{hint} See textarena.envs.registration.ENV_REGISTRY")
    failures: list[BaseException] = []
    for num_players in (1, 2):
        with random_state.active():
            try:
                game = make_game(game_id)
                game.reset(num_players=num_players, seed=seed)
                if num_players == 1 and not isinstance(game.state, ta.SinglePlayerState):
                    continue  # a game that accepted one player without checking: play it with two
                return LoadedGame(game, num_players)
            except Exception as exc:  # third-party code: classified below, re-raised with the reason
                failures.append(exc)
                if not _is_player_count_error(exc):
                    break
    if not failures:
        raise UnavailableGameError(game_id, "players", "does not reset with 1 or 2 players")
    kind, reason = classify_failure(failures[-1])
    error = UnavailableOfflineError if kind in ("nltk_data", "api_key", "internet") else UnavailableGameError
    raise error(game_id, kind, reason) from failures[-1]


def make_game(game_id: str) -> Any:
    """A new TextArena game without its wrappers (turngym formats observations and reads actions itself)."""
    ta = import_textarena()
    game = ta.make(game_id)
    while isinstance(game, ta.Wrapper):
        game = game.env
    return game


def _is_player_count_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, (AssertionError, ValueError)) and ("player" in text or "≤" in text)


def classify_failure(exc: BaseException) -> tuple[str, str]:
    """``(kind, reason)`` for an exception raised while building or resetting a game."""
    text = " ".join(str(exc).split())
    if isinstance(exc, LookupError) and "nltk" in text.lower():
        resource = re.search(r"Resource '?(\w+)'? not found", text)
        name = resource.group(1) if resource else "words"
        return "nltk_data", (
            f"needs the NLTK data package {name!r}, which is not installed and could not be downloaded; "
            f"with network access run: python -m nltk.downloader {name} averaged_perceptron_tagger_eng"
        )
    if "api key" in text.lower() or "api_key" in text.lower():
        return "api_key", f"needs an API key and the internet (an LLM runs part of the game): {text[:200]}"
    if isinstance(exc, (OSError, ConnectionError)) and not isinstance(exc, FileNotFoundError):
        return "internet", f"needs the internet: {type(exc).__name__}: {text[:200]}"
    if isinstance(exc, SyntaxError):
        return "python_version", f"its source does not parse on this Python (newer syntax): {text[:200]}"
    if isinstance(exc, (FileNotFoundError, ImportError)):
        return "broken_release", f"files are missing from textarena {TEXTARENA_VERSION}: {text[:200]}"
    if _is_player_count_error(exc):
        return "players", f"needs 3 or more players; turngym plays 1- and 2-player games: {text[:200]}"
    return "error", f"{type(exc).__name__}: {text[:200]}"


def format_messages(
    messages: Sequence[tuple[int, str, Any]],
    role_mapping: dict[int, str],
    *,
    skip_from: int | None = None,
    max_chars: int = 4000,
) -> str:
    """TextArena messages as ``[GAME] text`` / ``[Player 1] text`` lines; ``skip_from``'s own moves are left out.

    A message longer than ``max_chars`` is cut there and marked, so an echoed megabyte of action text
    never reaches the observation.
    """
    player_action = _observation_type("PLAYER_ACTION")
    lines = []
    for from_id, text, kind in messages:
        if from_id == skip_from and kind == player_action:
            continue
        sender = "GAME" if from_id == GAME_ID else role_mapping.get(from_id, f"Player {from_id}")
        text = str(text)
        if len(text) > max_chars:
            text = text[:max_chars] + f" [... {len(text) - max_chars} more characters]"
        lines.append(f"[{sender}] {text}")
    return "\n".join(lines)


def _observation_type(name: str) -> Any:
    from textarena.core import ObservationType

    return ObservationType[name]


def bracket_candidates(texts: Sequence[str]) -> list[str]:
    """Bracketed tokens (``[4]``, ``[e2e4]``) mentioned in ``texts``, newest text first, without duplicates."""
    seen: dict[str, None] = {}
    for text in reversed(texts):
        for token in _CANDIDATE.findall(text):
            if token.lower() not in ("[game]",) and not token.lower().startswith("[player"):
                seen.setdefault(token, None)
    return list(seen)


def made_invalid_move(state: Any, player_id: int, error_count_before: int) -> bool:
    """Whether the move ``player_id`` just made was rejected by the game.

    TextArena's player states count consecutive invalid moves in ``error_count`` (reset to 0 by a valid
    move) and, once the allowance is spent, end the game with ``game_info[player]["invalid_move"]``.
    """
    if state.game_info.get(player_id, {}).get("invalid_move"):
        return True
    return int(getattr(state, "error_count", 0)) > error_count_before


def accepted_moves(
    game: Any, random_state: GameRandom, candidates: Sequence[str], *, limit: int, stop_at_first: bool = False
) -> list[str]:
    """The candidates (at most ``limit`` tried) that the game accepts now, each tried on a copy of the game."""
    accepted = []
    player_id = game.state.current_player_id
    with random_state.trial():
        for move in list(candidates)[:limit]:
            trial = copy.deepcopy(game)
            before = int(getattr(trial.state, "error_count", 0))
            try:
                trial.step(move)
            except Exception:  # a move that crashes the game is not a move to offer
                continue
            if not made_invalid_move(trial.state, player_id, before):
                accepted.append(move)
                if stop_at_first:
                    break
    return accepted


# Game-specific knowledge, keyed by the TextArena class name: the full set of legal moves where the
# observations do not list them, and an oracle that reads the hidden state.
def _guess_the_number_moves(game: Any) -> list[str]:
    return [f"[{n}]" for n in range(game.min_number, game.max_number + 1) if n not in game.guessed_numbers]


def _guess_the_number_oracle(game: Any) -> list[str]:
    return [f"[{game.game_number}]"]


GAME_MOVES: dict[str, Callable[[Any], list[str]]] = {"GuessTheNumberEnv": _guess_the_number_moves}
GAME_ORACLES: dict[str, Callable[[Any], list[str]]] = {"GuessTheNumberEnv": _guess_the_number_oracle}
