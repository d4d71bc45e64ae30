"""The meeting room (lesson 001): ``free_slots`` wants YYYY-MM-DD; ``book_slot`` needs a manager."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from ..errors import ToolFailure
from ..vocabulary import ErrorCategory
from . import Tool

FIRST_HOUR, LAST_HOUR = 9, 16


class FreeSlotsInput(BaseModel):
    date: str = Field(description="Date as YYYY-MM-DD")


class BookSlotInput(BaseModel):
    date: str = Field(description="Date as YYYY-MM-DD")
    time: str = Field(description="Start of the one-hour slot as HH:MM")


class Rooms:
    """One meeting room's bookings: date -> taken start times."""

    def __init__(self, bookings: dict[str, list[str]] | None = None) -> None:
        self.bookings = {"2026-10-02": ["09:00", "14:00"]} if bookings is None else bookings
        self.requests: list[tuple[str, dict[str, str]]] = []  # every call the room service received
        self.listed: list[str] = []  # dates whose free slots it answered

    def free_slots(self, date: str) -> dict:
        self.requests.append(("free_slots", {"date": date}))
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
            raise ToolFailure(
                ErrorCategory.VALIDATION,
                f"date '{date}' is not in YYYY-MM-DD format; resend it in that format, e.g. '2026-10-02'",
            )
        taken = self.bookings.get(date, [])
        self.listed.append(date)
        hours = (f"{h:02d}:00" for h in range(FIRST_HOUR, LAST_HOUR + 1))
        return {"date": date, "free": [h for h in hours if h not in taken]}

    def book_slot(self, date: str, time: str) -> dict:
        self.requests.append(("book_slot", {"date": date, "time": time}))
        raise ToolFailure(
            ErrorCategory.PERMISSION, "booking rooms requires manager approval; ask the user to book it themselves"
        )

    def tools(self) -> list[Tool]:
        return [
            Tool("free_slots", "List free one-hour meeting-room slots on a date.", FreeSlotsInput, self.free_slots),
            Tool("book_slot", "Book a one-hour meeting-room slot.", BookSlotInput, self.book_slot),
        ]
