"""WebShop as a multi-turn text environment: search a shop, open products, choose options, buy.

Each episode draws a goal from the chosen split (``reset(seed=...)``, or ``options={"goal_index": i}`` for
the i-th goal of the split) and starts on the search page. Each turn is one action, ``search[keywords]`` or
``click[value]`` (grammar in :mod:`envs.webshop.text`; pages and clickables in :mod:`envs.webshop.session`).

Rewards: 0 for every turn but the purchase; ``buy now`` ends the episode (``terminated``) with WebShop's
score in [0, 1] (:mod:`envs.webshop.reward`), and ``success`` means a score of exactly 1. Text that holds no
action is invalid (``format_penalty``, ``info["action_is_valid"] = False``). A well-formed action the page
does not offer (``click`` on something absent, ``search`` away from the search page or with no keywords)
changes nothing and scores 0, as in the original, with ``info["action_available"] = False``. ``max_turns``
truncates.

Observations: ``observation_mode="text"`` joins the page's strings with " [SEP] "; ``"text_rich"`` writes one
per line with button markers. With ``show_available_actions`` a last line lists the page's actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

from envs.core import StepOutcome, TextEnv
from envs.webshop import text
from envs.webshop.catalogue import Shop, load_shop
from envs.webshop.goals import SPLITS
from envs.webshop.oracle import plan_purchase
from envs.webshop.products import Goal
from envs.webshop.reward import score_purchase
from envs.webshop.session import OBSERVATION_MODES, PageKind, ShopSession, render

__all__ = ["WebShopEnv"]

_BUTTON_COLOR, _CLICKED_COLOR, _RESET = "\x1b[36m", "\x1b[32m", "\x1b[0m"


class WebShopEnv(TextEnv):
    """WebShop (Yao et al., 2022) over a generated catalogue of 4,500 products, or over the original data.

    Args:
        split: "train", "validation" or "test": goals 1500 on, 500-1499 or 0-499 of the shuffled goals.
        observation_mode: "text" or "text_rich".
        max_turns: actions per episode before truncation (``None``: no limit).
        format_penalty: subtracted from the reward of a turn whose text holds no action.
        show_available_actions: end each observation with the line "Available actions: ...".
        require_answer_tag: only an action inside ``<answer>...</answer>`` counts.
        catalogue_seed: the seed of the generated catalogue (and of goal price caps).
        num_products: use only the first N products of the catalogue (``None``: all).
        data_dir: a directory with WebShop's original JSON files (see :mod:`envs.webshop.original`);
            ``None``: the generated catalogue.
        human_goals: with ``data_dir``, goals from the human-written instructions.
        render_mode: "ansi" or ``None``.

    Info keys besides the standard ones: ``goal_index`` (in the split), ``split``, ``goal_asin``, ``page``;
    after a step also ``action_available`` and ``invalid_reason``, and after a purchase ``purchase`` (the
    bought id, the chosen options and every reward term). Metrics: ``searches``, ``items_viewed``, and after
    a purchase ``score``, ``type_factor``, ``attribute_fraction``, ``option_fraction``, ``price_ok``.
    """

    def __init__(
        self,
        *,
        split: str = "train",
        observation_mode: str = "text",
        max_turns: int | None = 15,
        format_penalty: float = 0.1,
        show_available_actions: bool = True,
        require_answer_tag: bool = False,
        catalogue_seed: int = 0,
        num_products: int | None = None,
        data_dir: str | None = None,
        human_goals: bool = False,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"observation_mode must be one of {list(OBSERVATION_MODES)}, got {observation_mode!r}")
        if num_products is not None and (not isinstance(num_products, Integral) or num_products < 1):
            raise ValueError(f"num_products must be a positive integer or None, got {num_products!r}")
        self.split = split
        self.observation_mode = observation_mode
        self.show_available_actions = bool(show_available_actions)
        self.require_answer_tag = bool(require_answer_tag)
        self.shop: Shop = load_shop(
            data_dir=None if data_dir is None else str(data_dir),
            human=bool(human_goals),
            num_products=None if num_products is None else int(num_products),
            catalogue_seed=int(catalogue_seed),
        )
        self.goals: list[Goal] = self.shop.split(split)
        if not self.goals:
            raise ValueError(
                f"split {split!r} has no goals: the catalogue has {len(self.shop.catalogue.goals)} goals in all "
                "and the splits are test 0-499, validation 500-1499, train 1500 on; use more products"
            )
        self.instructions = text.instructions(max_turns, self.require_answer_tag, self.show_available_actions)
        self.action_format = text.action_format(self.require_answer_tag)
        self._goal_index = 0
        self._session: ShopSession | None = None
        self._searches = 0

    @property
    def goal(self) -> Goal:
        """The current episode's goal."""
        self._require_session()
        return self.goals[self._goal_index]

    @property
    def session(self) -> ShopSession:
        """The current visit (read it; act through :meth:`step`)."""
        return self._require_session()

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        unknown = sorted(set(options) - {"goal_index"})
        if unknown:
            raise ValueError(f"unknown reset options {unknown}; WebShopEnv accepts 'goal_index'")
        index = options.get("goal_index")
        if index is None:
            index = int(self.np_random.integers(len(self.goals)))
        if isinstance(index, bool) or not isinstance(index, Integral) or not 0 <= index < len(self.goals):
            raise ValueError(f"goal_index must be an integer in [0, {len(self.goals)}), got {index!r}")
        self._goal_index = int(index)
        goal = self.goals[self._goal_index]
        self._session = ShopSession(goal.instruction_text, self.shop.catalogue.by_asin, self.shop.search)
        self._searches = 0
        return self._observation(), self._state_info()

    def _step(self, action: str) -> StepOutcome:
        session = self._require_session()
        parsed = text.parse_action(action, require_answer_tag=self.require_answer_tag)
        if parsed.error:
            return self._outcome(f"Invalid action: {parsed.error}.", valid=False, available=False, reason=parsed.error)
        if parsed.name == "search":
            if not session.has_search_bar or not parsed.argument:
                why = (
                    "search only works on the search page" if not session.has_search_bar else "the keywords are empty"
                )
                return self._outcome(f"Nothing happened: {why}.", available=False, reason=why)
            session.search(parsed.argument)
            self._searches += 1
            return self._outcome("")
        if not session.click(parsed.argument):
            why = f"{_shorten(parsed.argument)!r} is not a button, product or option on this page"
            return self._outcome(f"Nothing happened: {why}.", available=False, reason=why)
        if session.kind is PageKind.DONE:
            return self._purchase()
        return self._outcome("")

    def render_text(self, color: bool = False) -> str:
        session = self._require_session()
        if not color:
            return render(session.page(), "text_rich")
        lines = []
        for e in session.page():
            if e.kind == "text":
                lines.append(e.text)
            else:
                tint = _CLICKED_COLOR if e.clicked else _BUTTON_COLOR
                lines.append(f"{tint}[{e.text}]{_RESET}")
        return "\n".join(lines)

    def valid_actions(self) -> list[str] | None:
        """The page's actions: every click, or on the search page one search (for the instruction's words);
        any other ``search[keywords]`` is valid there too. ``None`` before reset."""
        if self._session is None:
            return None
        if self._session.has_search_bar:
            keywords = self.goal.instruction_text.replace("[", " ").replace("]", " ")
            return [f"search[{keywords}]"]
        return [f"click[{c}]" for c in self._session.clickables()]

    def oracle(self) -> list[str] | None:
        """Actions that buy the goal's product with the goal's options from the current page (search it by
        title, page through the results, open it, click the options, buy). ``None`` if the search does not
        find it; ``[]`` once the episode is over."""
        if self._session is None:
            return None
        if self.episode_over:
            return []
        return plan_purchase(self._session, self.goal, self.shop)

    # ----------------------------------------------------------------------------------------------
    # Helpers
    # ----------------------------------------------------------------------------------------------
    def _observation(self, note: str = "") -> str:
        session = self._require_session()
        page = render(session.page(), self.observation_mode)
        parts = [note, page] if note else [page]
        if self.show_available_actions and session.kind is not PageKind.DONE:
            parts.append(f"Available actions: {', '.join(self._action_list())}")
        return "\n".join(parts)

    def _action_list(self) -> list[str]:
        session = self._require_session()
        if session.has_search_bar:
            return ["search[<keywords>]"]
        return [f"click[{c}]" for c in session.clickables()]

    def _purchase(self) -> StepOutcome:
        session = self._require_session()
        product = session.product
        assert product is not None
        breakdown = score_purchase(product, self.goal, session.options)
        session.score = breakdown.reward
        metrics = {
            **self._metrics(),
            "score": breakdown.reward,
            "type_factor": breakdown.type_factor,
            "attribute_fraction": breakdown.attribute_matches / max(breakdown.num_goal_attributes, 1),
            "option_fraction": breakdown.option_matches / max(breakdown.num_goal_options, 1),
            "price_ok": float(breakdown.price_ok),
        }
        purchase = {"asin": product.asin, "options": dict(session.options), **breakdown.as_dict()}
        return StepOutcome(
            observation=self._observation(),
            reward=breakdown.reward,
            terminated=True,
            success=breakdown.reward == 1.0,
            metrics=metrics,
            extra_info={**self._state_info(), "action_available": True, "invalid_reason": "", "purchase": purchase},
        )

    def _outcome(self, note: str, *, valid: bool = True, available: bool = True, reason: str = "") -> StepOutcome:
        return StepOutcome(
            observation=self._observation(note),
            action_is_valid=valid,
            metrics=self._metrics(),
            extra_info={**self._state_info(), "action_available": available, "invalid_reason": reason},
        )

    def _metrics(self) -> dict[str, float]:
        return {"searches": self._searches, "items_viewed": len(self._require_session().visited)}

    def _state_info(self) -> dict[str, Any]:
        goal = self.goals[self._goal_index]
        return {
            "goal_index": self._goal_index,
            "split": self.split,
            "goal_asin": goal.asin,
            "page": self._require_session().kind.value,
        }

    def _require_session(self) -> ShopSession:
        if self._session is None:
            raise RuntimeError("WebShopEnv has no episode before reset(); call reset() first")
        return self._session


def _shorten(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."
