"""An example scenario pack: a small warehouse with two tools and three scenarios (docs/packs.md).

Written only against the documented interface, ``agents.packs``. Load it with

    RLT_SCENARIO_PACKS=examples.inventory_pack python -m agents run \
        --scenario inventory-warehouse-name --policy structured

or set the same variable for ``./rlt up`` (the web process and its worker both load it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agents.packs import (
    Judge,
    Pack,
    Scenario,
    ToolFailure,
    answered,
    call,
    gives,
    mentions,
    mentions_any,
    state,
    tool,
)

Warehouse = Literal["north", "south"]


class Stockroom:
    """The world: units of each product per warehouse, the reservations made, the faults to show."""

    def __init__(self, *, scanner_timeouts: int = 0) -> None:
        self.stock = {"LMP-001": {"north": 7, "south": 2}, "LMP-002": {"north": 3, "south": 0}}
        self.reservations: list[dict] = []
        self.reserve_requests = 0
        self.scanner_timeouts = scanner_timeouts  # how many stock checks time out before one answers


class StockInput(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{3}$", description="The product code, e.g. LMP-001")
    warehouse: Warehouse = Field(description="Which warehouse: north or south")


class ReserveInput(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{3}$", description="The product code, e.g. LMP-001")
    warehouse: Warehouse = Field(description="Which warehouse: north or south")
    quantity: int = Field(gt=0, le=100, description="How many units to reserve")


def _units(room: Stockroom, sku: str, warehouse: str) -> int:
    if sku not in room.stock:
        raise ToolFailure("validation", f"unknown sku '{sku}'; known skus: {', '.join(room.stock)}")
    return room.stock[sku][warehouse]


@tool(StockInput)
def check_stock(room: Stockroom, sku: str, warehouse: str) -> dict:
    """Say how many units of a product a warehouse has in stock."""
    if room.scanner_timeouts:
        room.scanner_timeouts -= 1
        raise ToolFailure("transient", f"the {warehouse} warehouse's stock scanner timed out")
    return {"sku": sku, "warehouse": warehouse, "in_stock": _units(room, sku, warehouse)}


@tool(ReserveInput)
def reserve_stock(room: Stockroom, sku: str, warehouse: str, quantity: int) -> dict:
    """Reserve units of a product in a warehouse for a customer's order."""
    room.reserve_requests += 1
    have = _units(room, sku, warehouse)
    if quantity > have:
        raise ToolFailure(
            "business",
            f"Only {have} units of {sku} are in the {warehouse} warehouse. Nothing was reserved; "
            f"ask the customer whether {have} will do",
        )
    room.stock[sku][warehouse] = have - quantity
    reservation = {"reservation": f"R-{len(room.reservations) + 1:04d}", "sku": sku, "warehouse": warehouse}
    room.reservations.append({**reservation, "quantity": quantity})
    return {**reservation, "quantity": quantity, "left": have - quantity}


def reserved(sku: str, warehouse: str, quantity: int):
    """A check on the world: exactly this one reservation was made."""

    def test(room: Stockroom):
        made = [(r["sku"], r["warehouse"], r["quantity"]) for r in room.reservations]
        return made == [(sku, warehouse, quantity)], f"reservations made: {made or 'none'}"

    return state(f"{quantity} × {sku} reserved once in {warehouse}", test)


def nothing_reserved(room: Stockroom):
    return not room.reservations, f"{len(room.reservations)} reservation(s) made"


TOOLS = (check_stock, reserve_stock)

PACK = Pack(
    "inventory",
    "Inventory (example pack)",
    [
        Scenario(
            "inventory-warehouse-name",
            "A warehouse name the tool spells differently",
            "Reserve 5 desk lamps (LMP-001) for me from the North warehouse.",
            tools=TOOLS,
            world=Stockroom,
            judge=Judge(
                answered(), reserved("LMP-001", "north", 5), mentions("answer gives the reservation", "R-0001")
            ),
            opening=[call("reserve_stock", sku="LMP-001", warehouse="North", quantity=5)],
            description="The warehouse is sent as 'North'; the input model accepts 'north' or 'south' and says so.",
        ),
        Scenario(
            "inventory-short-stock",
            "Fewer units in stock than asked for",
            "Reserve 5 units of LMP-002 from the north warehouse.",
            tools=TOOLS,
            world=Stockroom,
            judge=Judge(
                answered(),
                state("nothing reserved", nothing_reserved),
                state(
                    "reservation asked for once",
                    lambda room: (room.reserve_requests == 1, f"asked {room.reserve_requests} times"),
                ),
                gives(3, "unit", "in stock", "left", name="answer gives the 3 units in stock"),
            ),
            opening=[call("reserve_stock", sku="LMP-002", warehouse="north", quantity=5)],
            description="Only 3 are in stock: a business refusal that no retry changes; explain it and ask.",
        ),
        Scenario(
            "inventory-flaky-scanner",
            "The stock scanner times out twice",
            "How many LMP-001 desk lamps does the north warehouse have?",
            tools=TOOLS,
            world=lambda: Stockroom(scanner_timeouts=2),
            judge=Judge(
                answered(),
                gives(7, name="answer gives the 7 in stock"),
                mentions_any("answer names the product", "LMP-001", "desk lamp"),
            ),
            opening=[call("check_stock", sku="LMP-001", warehouse="north")],
            description="A transient fault twice, then the count: retried in code, the model never sees it.",
        ),
    ],
    description="An example pack: a warehouse with check_stock and reserve_stock.",
)
