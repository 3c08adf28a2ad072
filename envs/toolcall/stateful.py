"""The two stateful tools of the tool-calling tasks: a bank and an inventory.

Each trajectory gets its own copy of the starting state (``create_state``), so episodes never see
each other's transfers. Money is held in whole cents (integers) so that final states compare
exactly; amounts are given in dollars with at most two decimals. A refused operation (unknown
account, insufficient funds, stock below zero) changes nothing and returns an error result.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from tools.base import ToolResult

__all__ = ["BankTool", "InventoryTool", "dollars"]


def dollars(cents: int) -> str:
    """``123456`` -> ``"1234.56"``."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def _unknown(kind: str, name: str, known: Mapping[str, Any]) -> ToolResult:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return ToolResult.error(f"no {kind} {name!r}{hint}")


class BankTool:
    """Balances and transfers between the accounts of a tiny bank (one account per person)."""

    name = "bank"
    description = (
        "A bank with one account per person, named after its owner. operation 'balance' (account) returns the "
        "balance in USD; 'transfer' (account, to_account, amount in USD with at most 2 decimals) moves money."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": ["balance", "transfer"]},
            "account": {"type": "string", "description": "The account owner's full name (the payer for transfers)"},
            "to_account": {"type": "string", "description": "The payee's full name (transfer only)"},
            "amount": {"type": "number", "exclusiveMinimum": 0, "description": "USD to transfer"},
        },
        "required": ["operation", "account"],
        "additionalProperties": False,
    }

    def __init__(self, balances: Mapping[str, int]) -> None:
        self.balances = dict(balances)

    def create_state(self, balances: Mapping[str, int] | None = None) -> dict[str, int]:
        """A fresh copy of the starting balances (cents), or of ``balances`` where given."""
        return dict(self.balances if balances is None else balances)

    def release_state(self, state: dict[str, int]) -> None:
        return None

    async def call(self, arguments: Mapping[str, Any], state: dict[str, int]) -> ToolResult:
        account = _find(state, arguments["account"])
        if account is None:
            return _unknown("account", arguments["account"], state)
        if arguments["operation"] == "balance":
            return ToolResult(f"{account}: {dollars(state[account])} USD")
        if "to_account" not in arguments or "amount" not in arguments:
            return ToolResult.error("transfer needs to_account and amount")
        payee = _find(state, arguments["to_account"])
        if payee is None:
            return _unknown("account", arguments["to_account"], state)
        cents = round(arguments["amount"] * 100)
        if abs(arguments["amount"] * 100 - cents) > 1e-6:
            return ToolResult.error(f"amounts are in whole cents (at most 2 decimals), got {arguments['amount']}")
        if payee == account:
            return ToolResult.error("the payer and the payee are the same account")
        if cents > state[account]:
            return ToolResult.error(f"insufficient funds: {account} has {dollars(state[account])} USD")
        state[account] -= cents
        state[payee] += cents
        return ToolResult(
            f"Transferred {dollars(cents)} USD from {account} (now {dollars(state[account])}) "
            f"to {payee} (now {dollars(state[payee])})."
        )


class InventoryTool:
    """Stock counts of a warehouse, by product name."""

    name = "inventory"
    description = (
        "A warehouse holding units of every product. operation 'count' (product) returns the units in stock; "
        "'adjust' (product, change) adds change units (negative to remove; stock cannot go below 0)."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": ["count", "adjust"]},
            "product": {"type": "string", "description": "The product's name"},
            "change": {"type": "integer", "description": "Units to add (negative: remove); adjust only"},
        },
        "required": ["operation", "product"],
        "additionalProperties": False,
    }

    def __init__(self, stock: Mapping[str, int]) -> None:
        self.stock = dict(stock)

    def create_state(self, stock: Mapping[str, int] | None = None) -> dict[str, int]:
        return dict(self.stock if stock is None else stock)

    def release_state(self, state: dict[str, int]) -> None:
        return None

    async def call(self, arguments: Mapping[str, Any], state: dict[str, int]) -> ToolResult:
        product = _find(state, arguments["product"])
        if product is None:
            return _unknown("product", arguments["product"], state)
        if arguments["operation"] == "count":
            return ToolResult(f"{product}: {state[product]} units in stock")
        if "change" not in arguments:
            return ToolResult.error("adjust needs change (an integer, negative to remove units)")
        change = int(arguments["change"])
        if state[product] + change < 0:
            return ToolResult.error(f"only {state[product]} units of {product} in stock; cannot remove {-change}")
        state[product] += change
        return ToolResult(f"{product}: {state[product]} units in stock (was {state[product] - change})")


def _find(state: Mapping[str, int], name: str) -> str | None:
    """The key of ``state`` equal to ``name`` up to case and spacing."""
    wanted = " ".join(name.lower().split())
    for key in state:
        if key.lower() == wanted:
            return key
    return None
