"""Input no view can use, refused with a 400 page naming the parameter before any view runs.

- A NUL character in a query string or form value: no field accepts one, and PostgreSQL cannot store
  or even compare text holding one, so a filter on it fails in the database (the admin's list filters
  did, with a 500).
- An empty ``_to_field`` on an admin page: Django's admin checks the field only when the value is not
  empty, then looks up a field named "" (a 500).
- A whole number past 64 bits in an admin page's filter (``?groups=10000000000000000000``): the
  admin passes it to the database as an id, and SQLite cannot hold it (an OverflowError, a 500).
  The admin's text search (``q``) takes any text, and a form posted names a bad choice itself.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse


def unusable_input_refused(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    def middleware(request: HttpRequest) -> HttpResponse:
        problem = _unusable_input(request)
        if problem is not None:
            name, message = problem
            if request.path.startswith("/api/"):  # the API's error shape (docs/api.md)
                return JsonResponse({"errors": [{"path": name, "message": message}]}, status=400)
            return render(request, "400.html", {"message": message}, status=400)
        return get_response(request)

    return middleware


def _unusable_input(request: HttpRequest) -> tuple[str, str] | None:
    """The parameter no view can use and why, or None."""
    sources = [request.GET, request.POST] if request.method == "POST" else [request.GET]
    for source in sources:
        for name, values in source.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                shown = name.replace(chr(0), "")
                return shown, f"The value of “{shown}” contains a NUL character, which no field accepts."
            if not request.path.startswith(reverse("admin:index")):
                continue
            if name == "_to_field" and "" in values:
                return name, "“_to_field” is empty: it must name a field of the model."
            if source is request.GET and name != "q" and any(_past_64_bits(value) for value in values):
                return name, f"The value of “{name}” is a number past {INTEGER_MAX:,}, the largest an id can be."
    return None


INTEGER_MAX = 2**63 - 1  # the largest integer SQLite and PostgreSQL's bigint hold


def _past_64_bits(value: str) -> bool:
    digits = value.strip().removeprefix("-").removeprefix("+").lstrip("0")
    if not (digits.isascii() and digits.isdigit()):
        return False
    return len(digits) > len(str(INTEGER_MAX)) or (len(digits) == len(str(INTEGER_MAX)) and int(digits) > INTEGER_MAX)
