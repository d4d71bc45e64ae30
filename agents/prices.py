"""Model prices: what tokens cost, one definition for every page and command.

A run's cost is ``input_tokens × input price + output_tokens × output price`` of its model, at the
prices in force on the run's day, in US dollars. The prices come from ``genai-prices`` (pinned in the
requirements: its bundled table is dated, and moving the pin moves the prices), which knows each
model's price history; ``RLT_PRICES`` overrides or adds models. A model neither knows has no price:
its cost is *unknown*, never zero and never guessed.

The simulated model's token counts are estimated from the real requests and replies it is sent and
writes; it is priced as the model the ``claude`` backend asks for by default (``SIMULATED_PRICED_AS``),
and every price says which model it is the price of (``Price.basis``), so a simulated run's cost reads
"priced as claude-haiku-4-5". ``RLT_PRICES`` can price it otherwise, or not at all (``null``).

``RLT_PRICES`` is a JSON object, or the path of a file holding one, of model name to either
``{"input": 1.0, "output": 5.0, "as_of": "2026-12-01"}`` (dollars per million tokens, and the day
those prices were read; ``as_of`` is required, so every price is dated), ``{"as": "other-model"}``
(priced as another model), or ``null`` (no price: unknown). A bad value is a ``PriceTableError``
naming the entry and what is expected.

No Django, and ``genai_prices`` (whose table takes a few tenths of a second to load) is imported only
when a price is first asked for.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from .vocabulary import CLAUDE_DEFAULT_MODEL
from .vocabulary import SIMULATED_MODEL_NAME as SIMULATED_MODEL

PRICES_ENV = "RLT_PRICES"
SIMULATED_PRICED_AS = CLAUDE_DEFAULT_MODEL
MILLION = Decimal(1_000_000)


class PriceTableError(ValueError):
    """``RLT_PRICES`` cannot be read: says which entry and what is expected."""


@dataclass(frozen=True)
class Price:
    """One model's price per million tokens, on a day, and where it comes from."""

    model: str  # the model asked about
    priced_as: str  # the model whose prices these are (``model`` unless aliased)
    name: str  # that model's name as the table spells it ("Claude Haiku 4.5")
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    as_of: date  # the day whose prices these are
    source: str  # "genai-prices 0.2.3" or "RLT_PRICES"

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """What these tokens cost at this price, in dollars."""
        return (Decimal(input_tokens) * self.input_per_mtok + Decimal(output_tokens) * self.output_per_mtok) / MILLION

    @property
    def basis(self) -> str:
        """How a page says where the price comes from: "claude-haiku-4-5 at $1/$5 per million tokens
        (input/output), prices of 2026-12-01 (genai-prices 0.2.3)", naming the model priced as when aliased."""
        model = self.priced_as if self.priced_as == self.model else f"{self.model} priced as {self.priced_as}"
        return (
            f"{model} at ${_plain(self.input_per_mtok)}/${_plain(self.output_per_mtok)} per million tokens "
            f"(input/output), prices of {self.as_of.isoformat()} ({self.source})"
        )


def _plain(amount: Decimal) -> str:
    text = format(amount.normalize(), "f")
    return text


def format_money(amount: Decimal | None) -> str:
    """A cost as pages print it: "$0.0042", "$12.40", "<$0.0001", or "unknown" when there is no price."""
    if amount is None:
        return "unknown"
    if amount == 0:
        return "$0"
    if amount < Decimal("0.0001"):
        return "<$0.0001"
    if amount < 1:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"


def genai_prices_version() -> str:
    try:
        return package_version("genai-prices")
    except PackageNotFoundError:  # pragma: no cover - it is a runtime requirement
        return "unknown version"


def _override_text() -> str:
    raw = os.environ.get(PRICES_ENV, "").strip()
    if raw and not raw.startswith("{"):
        path = Path(raw).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PriceTableError(
                f"{PRICES_ENV} names the file {raw!r}, which cannot be read ({exc.strerror}); "
                "expected a JSON object of model prices, or the path of a file holding one"
            ) from None
    return raw


def _as_of(value: Any, where: str) -> date:
    if not isinstance(value, str):
        raise PriceTableError(f"{where}.as_of: expected the day the prices were read, as YYYY-MM-DD; got {value!r}")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise PriceTableError(f"{where}.as_of: expected a date as YYYY-MM-DD; got {value!r}") from None


def _rate(value: Any, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceTableError(f"{where}: expected dollars per million tokens, a number ≥ 0; got {value!r}")
    try:
        rate = Decimal(str(value))
    except ArithmeticError:
        rate = Decimal(-1)
    if not rate.is_finite() or rate < 0:
        raise PriceTableError(f"{where}: expected dollars per million tokens, a number ≥ 0; got {value!r}")
    return rate


@dataclass(frozen=True)
class _Entry:
    alias: str | None = None
    input_per_mtok: Decimal | None = None
    output_per_mtok: Decimal | None = None
    as_of: date | None = None
    unknown: bool = False


@cache
def overrides() -> dict[str, _Entry]:
    """``RLT_PRICES`` read and checked (``PriceTableError`` when it cannot be used), with the
    simulated model's alias unless it names the simulated model itself."""
    entries: dict[str, _Entry] = {SIMULATED_MODEL: _Entry(alias=SIMULATED_PRICED_AS)}
    text = _override_text()
    if not text:
        return entries
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PriceTableError(f"{PRICES_ENV} is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict):
        raise PriceTableError(f"{PRICES_ENV}: expected a JSON object of model name to price; got {type(data).__name__}")
    for model, value in data.items():
        where = f"{PRICES_ENV}[{model!r}]"
        if value is None:
            entries[model] = _Entry(unknown=True)
        elif isinstance(value, dict) and set(value) == {"as"} and isinstance(value["as"], str) and value["as"]:
            entries[model] = _Entry(alias=value["as"])
        elif isinstance(value, dict) and {"input", "output", "as_of"} <= set(value) <= {"input", "output", "as_of"}:
            entries[model] = _Entry(
                input_per_mtok=_rate(value["input"], f"{where}.input"),
                output_per_mtok=_rate(value["output"], f"{where}.output"),
                as_of=_as_of(value["as_of"], where),
            )
        else:
            raise PriceTableError(
                f'{where}: expected {{"input": dollars, "output": dollars, "as_of": "YYYY-MM-DD"}} per million '
                f'tokens, {{"as": "another-model"}}, or null for no price; got {json.dumps(value)[:80]}'
            )
    return entries


def prices_reload() -> None:
    """Read ``RLT_PRICES`` again (tests, after changing it)."""
    overrides.cache_clear()
    price.cache_clear()


def _today() -> date:
    return datetime.now(UTC).date()


@cache
def price(model: str, on: date | None = None) -> Price | None:
    """``model``'s price on the day ``on`` (today when None), or None when no table knows it."""
    on = on or _today()
    asked = model
    seen: set[str] = set()
    while True:
        entry = overrides().get(model)
        if entry is None or model in seen:
            break
        seen.add(model)
        if entry.unknown:
            return None
        if entry.alias is None:
            return Price(
                asked,
                model,
                model,
                entry.input_per_mtok,
                entry.output_per_mtok,
                entry.as_of,
                PRICES_ENV,  # type: ignore[arg-type]
            )
        model = entry.alias
    return _table_price(asked, model, on)


def _table_price(asked: str, model: str, on: date) -> Price | None:
    if not model:
        return None
    from genai_prices import Usage, calc_price  # a large table: loaded on the first price asked for

    moment = datetime(on.year, on.month, on.day, tzinfo=UTC)
    try:
        per_input = calc_price(Usage(input_tokens=1_000_000), model, genai_request_timestamp=moment)
        per_output = calc_price(Usage(output_tokens=1_000_000), model, genai_request_timestamp=moment)
    except LookupError:
        return None
    return Price(
        asked,
        model,
        per_input.model.name or model,
        Decimal(per_input.total_price),
        Decimal(per_output.total_price),
        on,
        f"genai-prices {genai_prices_version()}",
    )


def cost(model: str, input_tokens: int, output_tokens: int, *, on: date | None = None) -> Decimal | None:
    """What ``input_tokens`` and ``output_tokens`` of ``model`` cost on the day ``on``; None: unknown."""
    found = price(model, on)
    return None if found is None else found.cost(input_tokens, output_tokens)
