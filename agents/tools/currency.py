"""``convert_currency`` (lesson 000): only JPY, USD and EUR; the amount must be positive."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from . import Tool

# Units of each currency per US dollar: 100 USD = 92.0 EUR.
RATES = {"USD": 1.0, "EUR": 0.92, "JPY": 150.0}

Currency = Literal["JPY", "USD", "EUR"]


class ConvertCurrencyInput(BaseModel):
    amount: float = Field(gt=0, description="How much to convert; greater than 0")
    from_currency: Currency = Field(description="Currency to convert from")
    to_currency: Currency = Field(description="Currency to convert to")


def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    converted = round(amount / RATES[from_currency] * RATES[to_currency], 2)
    return f"{amount} {from_currency} = {converted} {to_currency}"


def currency_tools() -> list[Tool]:
    return [
        Tool(
            "convert_currency",
            "Convert an amount between JPY, USD and EUR at today's rate.",
            ConvertCurrencyInput,
            convert_currency,
        )
    ]
