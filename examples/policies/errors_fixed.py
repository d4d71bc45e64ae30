"""A failure names its category, says if a retry can help, and explains.

Lesson 002's fixed ``errors.py``, as the lesson writes it (``Json`` comes from
``agents.policy_code`` here, from ``kit.api`` in the lesson's workshop).
"""

from agents.policy_code import Json

RETRYABLE = {"transient"}


def fail(category: str, message: str) -> Json:
    """The result a tool returns when it fails.
    Nothing found is a valid answer, so "empty" carries no error.
    """
    if category == "empty":
        return {"orders": [], "message": message}

    return {
        "isError": True,
        "error": {
            "errorCategory": category,
            "isRetryable": category in RETRYABLE,
            "message": message,
        },
    }


def should_retry(error: Json) -> bool:
    """Retry only a failure that says a retry can help."""
    return bool(error.get("isRetryable"))
