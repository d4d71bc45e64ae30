"""The price table: genai-prices' dated prices, RLT_PRICES's overrides, unknown for a model in neither."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from agents import prices
from agents.vocabulary import CLAUDE_DEFAULT_MODEL, SIMULATED_MODEL_NAME


@pytest.fixture(autouse=True)
def fresh_table(monkeypatch):
    monkeypatch.delenv(prices.PRICES_ENV, raising=False)
    prices.prices_reload()
    yield
    prices.prices_reload()


def test_a_claude_model_is_priced_per_million_tokens_on_the_day_asked_with_the_table_named():
    price = prices.price("claude-haiku-4-5", date(2026, 12, 1))
    assert price is not None
    assert (price.input_per_mtok, price.output_per_mtok) == (Decimal(1), Decimal(5))
    assert price.cost(1_000_000, 200_000) == Decimal(2)
    assert "prices of 2026-12-01" in price.basis and "genai-prices 0.2.3" in price.basis


def test_a_model_no_table_knows_costs_unknown_never_zero():
    assert prices.price("made-up-model-7") is None
    assert prices.cost("made-up-model-7", 1000, 1000) is None
    assert prices.format_money(None) == "unknown"


def test_the_simulated_model_is_priced_as_the_claude_backends_model_and_says_so():
    price = prices.price(SIMULATED_MODEL_NAME, date(2026, 12, 1))
    assert price is not None and price.priced_as == CLAUDE_DEFAULT_MODEL
    assert f"{SIMULATED_MODEL_NAME} priced as {CLAUDE_DEFAULT_MODEL}" in price.basis


def test_rlt_prices_overrides_a_model_adds_one_and_takes_a_price_away(monkeypatch, tmp_path):
    table = tmp_path / "prices.json"
    table.write_text(
        '{"claude-haiku-4-5": {"input": 0.5, "output": 2, "as_of": "2026-11-30"},'
        ' "in-house-7b": {"as": "claude-haiku-4-5"}, "simulated-rules-1": null}'
    )
    monkeypatch.setenv(prices.PRICES_ENV, str(table))
    prices.prices_reload()
    own = prices.price("claude-haiku-4-5")
    assert own.cost(1_000_000, 1_000_000) == Decimal("2.5") and own.source == prices.PRICES_ENV
    assert own.as_of == date(2026, 11, 30)
    assert prices.price("in-house-7b").cost(1_000_000, 0) == Decimal("0.5")
    assert prices.price(SIMULATED_MODEL_NAME) is None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"m": {"input": 1, "output": 2}}', "per million"),
        ('{"m": {"input": -1, "output": 2, "as_of": "2026-12-01"}}', "m'].input"),
        ('{"m": {"input": 1, "output": 2, "as_of": "yesterday"}}', "YYYY-MM-DD"),
        ("/no/such/prices.json", "cannot be read"),
    ],
)
def test_a_bad_rlt_prices_names_the_entry_and_what_is_expected(monkeypatch, value, said):
    monkeypatch.setenv(prices.PRICES_ENV, value)
    prices.prices_reload()
    with pytest.raises(prices.PriceTableError, match=said.replace("[", r"\[").replace("]", r"\]")):
        prices.overrides()


def test_money_is_printed_to_a_tenth_of_a_cent_below_a_dollar():
    assert prices.format_money(Decimal("0.00123")) == "$0.0012"
    assert prices.format_money(Decimal("12.4")) == "$12.40"
    assert prices.format_money(Decimal("0.00001")) == "<$0.0001"
