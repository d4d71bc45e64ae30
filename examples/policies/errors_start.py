"""EDIT THIS FILE. Every tool failure is built here, and retries follow it.
Run `python manage.py check_policy examples.policies.errors_start` until it is green.

Lesson 002's starting ``errors.py``, as the lesson writes it (``Json`` comes from
``agents.policy_code`` here, from ``kit.api`` in the lesson's workshop).
"""

from agents.policy_code import Json


def fail(category: str, message: str) -> Json:
    """The result a tool returns when it fails."""
    # TODO(workshop): set isError and carry errorCategory, isRetryable and
    # the message. A category of "empty" is not a failure: return the empty
    # list with the message and no error.
    return {"error": {"message": "Error"}}


def should_retry(error: Json) -> bool:
    """Whether the harness should try the same call again."""
    # TODO(workshop): retry a transient failure and nothing else.
    return True
