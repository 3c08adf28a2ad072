"""Stateful task templates: bank transfers and inventory changes, scored by the final state.

The expected final state is computed here on a copy of the world's starting state (money in cents).
The final answer of these tasks is free text (``done``): only the state counts.
"""

from __future__ import annotations

import random
from typing import Any

from envs.toolcall.stateful import dollars
from envs.toolcall.templates import World, _get, _lookup, _pick, _task, _template

__all__: list[str] = []


def _bank(operation: str, account: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("bank", {"operation": operation, "account": account, **extra})


def _inventory(operation: str, product: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("inventory", {"operation": operation, "product": product, **extra})


def _state(tool: str, expected: dict[str, int]) -> dict[str, Any]:
    return {"kind": "state", "answer": "done", "state_tool": tool, "expected_state": expected}


def _two_people(rng: random.Random, world: World) -> tuple[str, str]:
    payer, payee = rng.sample(world["tables"]["people"], 2)
    return payer["name"], payee["name"]


@_template(stateful=True)
def bank_transfer(rng: random.Random, world: World) -> dict[str, Any]:
    payer, payee = _two_people(rng, world)
    balances = dict(world["bank"])
    cents = rng.randrange(100, balances[payer])
    balances[payer] -= cents
    balances[payee] += cents
    return _task(
        f"Transfer {dollars(cents)} USD from {payer}'s bank account to {payee}'s account.",
        [[_bank("transfer", payer, to_account=payee, amount=cents / 100)]],
        **_state("bank", balances),
    )


@_template(stateful=True)
def bank_half_balance(rng: random.Random, world: World) -> dict[str, Any]:
    payer, payee = _two_people(rng, world)
    balances = dict(world["bank"])
    half = balances[payer] // 2  # balances are whole even dollars: half is exact
    balances[payer] -= half
    balances[payee] += half
    return _task(
        f"{payer} wants to give exactly half of their current bank balance to {payee}. Make the transfer.",
        [[_bank("balance", payer)], [_bank("transfer", payer, to_account=payee, amount=half / 100)]],
        **_state("bank", balances),
    )


@_template(stateful=True)
def bank_pay_ceo(rng: random.Random, world: World) -> dict[str, Any]:
    people = [p for p in world["tables"]["people"] if _get(world, "companies", p["employer"])["ceo"] != p["name"]]
    person = rng.choice(people)
    ceo = _get(world, "companies", person["employer"])["ceo"]
    balances = dict(world["bank"])
    amount = balances[person["name"]]
    balances[person["name"]] = 0
    balances[ceo] += amount
    return _task(
        f"Move {person['name']}'s entire bank balance to the account of the CEO of the company "
        f"{person['name']} works for.",
        [
            [_bank("balance", person["name"]), _lookup("people", person["name"], "employer")],
            [_lookup("companies", person["employer"], "ceo")],
            [_bank("transfer", person["name"], to_account=ceo, amount=amount / 100)],
        ],
        **_state("bank", balances),
    )


@_template(stateful=True)
def inventory_ship(rng: random.Random, world: World) -> dict[str, Any]:
    product = rng.choice([p for p in world["tables"]["products"] if world["inventory"][p["name"]] >= 2])
    stock = dict(world["inventory"])
    units = rng.randrange(1, stock[product["name"]] + 1)
    stock[product["name"]] -= units
    return _task(
        f"Ship {units} units of the {product['name']}: remove them from the warehouse inventory.",
        [[_inventory("adjust", product["name"], change=-units)]],
        **_state("inventory", stock),
    )


@_template(stateful=True)
def inventory_restock(rng: random.Random, world: World) -> dict[str, Any]:
    product = _pick(rng, world, "products")
    stock = dict(world["inventory"])
    target = stock[product["name"]] + rng.randrange(1, 60)
    change = target - stock[product["name"]]
    stock[product["name"]] = target
    return _task(
        f"Restock the {product['name']} so that the warehouse holds exactly {target} units of it.",
        [[_inventory("count", product["name"])], [_inventory("adjust", product["name"], change=change)]],
        **_state("inventory", stock),
    )


@_template(stateful=True)
def inventory_company_minimum(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    stock = dict(world["inventory"])
    products = company["products"]
    minimum = max(stock[p] for p in products) + rng.randrange(1, 30)  # every product needs topping up
    adjustments = [_inventory("adjust", p, change=minimum - stock[p]) for p in products]
    for product in products:
        stock[product] = minimum
    return _task(
        f"Every product made by {company['name']} must have at least {minimum} units in the warehouse. "
        f"Top up each of its products that has fewer to exactly {minimum} units.",
        [[_lookup("companies", company["name"], "products")], [_inventory("count", p) for p in products], adjustments],
        **_state("inventory", stock),
    )
