"""What diagnosis can find: each kind's stable key, what it is, the fix it points to and its lesson.

The keys are what the CLI, the API and the filters take; ``RULE_SET`` names the version of the rules
that made a run's findings (stored with them, so a rule change is found and recomputed). The lessons
are ``../shared/seeds/``: 000 (the repair loop), 001 (handling tool errors), 002 (structured errors).
"""

from __future__ import annotations

from dataclasses import dataclass

# Bump when a rule changes what it finds or says: stored findings of an older rule set are recomputed.
RULE_SET = "2026.12.4"


@dataclass(frozen=True)
class Kind:
    key: str
    title: str
    what: str  # one sentence: what it is
    lesson: str  # where the lessons say so, quoted
    why: str  # why it matters, in the lessons' words


KINDS: tuple[Kind, ...] = (
    Kind(
        "retried-refusal",
        "Refusal retried",
        "The same call was made again after a failure a retry cannot fix (validation, permission, business, "
        "or isRetryable false).",
        '001 "Four kinds of failure": "an agent that retries a permission error ten times"; 002: "A retry of a '
        'refusal is not free. Three attempts are three tool calls for one answer that never changes."',
        "Each repeat is a tool call (and, when the model repeats it, a model call) for an answer that cannot change.",
    ),
    Kind(
        "vague-error",
        "Vague error message",
        "A failure the model was sent says nothing of what went wrong, why, or what to do instead.",
        "000: \"Vague: 'invalid input': Claude knows something is wrong but not what, so it may retry blindly or "
        "give up\"; 001: \"Weak: 'ValueError' / Better: 'invalid date' / Good: date '28/09/2026' is not in "
        'YYYY-MM-DD format; resend as \'2026-09-28\'"; 002: "The agent cannot tell a timeout from a refusal".',
        "The model repairs from the message: with nothing in it, it guesses, retries blindly or gives up.",
    ),
    Kind(
        "internal-detail-leak",
        "Internal details in an error",
        "A failure text the model was sent holds a stack trace, SQL, a hostname or private address, a file path "
        "or a secret.",
        '001: "Keep internal details out. Stack traces, SQL text and hostnames waste tokens, can leak information, '
        'and give the model irrelevant things to fixate on"; 002: "A stack trace is operator detail."',
        "The model reads it on every later turn, may repeat it to the user, and fixates on what it cannot fix.",
    ),
    Kind(
        "transient-to-model",
        "Transient error left to the model",
        "A transient failure (a timeout, 429, 5xx) was sent to the model, which then made the same call again itself.",
        '001: "Letting the model retry transient errors. It burns steps and tokens; do it in code"; "retry with '
        'backoff inside the tool wrapper; the model never sees it unless retries run out".',
        "Every retry costs a model turn, which re-reads the whole conversation; code retries for the price of "
        "the tool call.",
    ),
    Kind(
        "transient-not-retried",
        "Transient error not retried",
        "A transient failure that said a retry could help was sent to the model on its first attempt: the "
        "harness never tried it again.",
        '001: "Transient: timeout, HTTP 503, rate limit: your code: retry with backoff inside the tool wrapper; '
        'the model never sees it unless retries run out"; 002: "Only a transient failure is retried, in code, '
        'with a bound" (and its spot-the-bug: a flag read at the wrong level is never retried).',
        "A blip the harness could have absorbed becomes the model's problem: a failed answer or a model-made retry.",
    ),
    Kind(
        "unsafe-write-retry",
        "Unsafe write retried",
        "A call that changes something was made again after a failure that may have applied (a timeout), with "
        "no idempotency key.",
        "001: \"Only retry what is safe to repeat. Retrying a read is harmless; retrying 'charge the card' after a "
        'timeout can charge it twice" and "Retrying non-idempotent actions blindly after a timeout."',
        "The first call may have gone through: the retry can apply it twice (a second charge, a second refund).",
    ),
    Kind(
        "no-error-guard",
        "No consecutive-error guard",
        "More failed calls in a row than a consecutive-error guard of 3 allows, and the run went on.",
        '001 "Stopping on repeated failure": "Put a limit on consecutive errors so a confused run ends quickly '
        'and cheaply" (too_many_errors(limit=3)); "No consecutive-error limit, so a stuck model loops until the '
        'step cap."',
        "A stuck run spends a model turn and a tool call on every repeat until the step cap.",
    ),
    Kind(
        "empty-as-error",
        "Empty result as an error",
        '"Nothing found" was reported to the model as a failure, or retried.',
        '002: "Nothing found is not a failure ... The starting code reports the empty list as a failure and '
        'retries it"; "An empty result is a valid answer, not an error."',
        "The model reports a failure instead of the true answer (there is nothing), after retries that find "
        "nothing again.",
    ),
    Kind(
        "fatal-continued",
        "Fatal error did not stop the run",
        "A fatal failure (credentials revoked, 401, disk full, sandbox gone) was retried or sent to the model, "
        "and the run went on.",
        '001: "Fatal: credentials revoked, disk full, sandbox gone: your code: stop the run with a clear reason; '
        "don't ask the model to work around it\".",
        "Nothing the model or a retry does can fix it: every call after it is wasted, and the real reason is buried.",
    ),
    Kind(
        "misleading-error",
        "Misleading error message",
        'A failure\'s message says one thing ("not found") while its category says another (a permission refusal).',
        '001 "How it actually works": "if the error message is misleading (says \'not found\' when the real '
        "problem is permissions), the model will 'fix' the wrong thing, confidently. Error text is part of your "
        'prompt."',
        "The model fixes what the message names, confidently, and can act on the wrong thing.",
    ),
    Kind(
        "crash-on-tool-error",
        "Tool error crashed the run",
        "A tool's failure was raised through the loop and ended the run, instead of going back to the model as "
        "an is_error tool_result.",
        '000: "If you let either of these raise out of the loop, your program stops and Claude never learns '
        'anything"; 001: "Raising through the loop so a single bad argument kills the run."',
        "A crash ends the run; the same failure returned as is_error is information the model can repair from.",
    ),
)

BY_KEY: dict[str, Kind] = {k.key: k for k in KINDS}
KEYS: tuple[str, ...] = tuple(BY_KEY)


def kind_get(key: str) -> Kind:
    """The kind with this key; ``ValueError`` naming the valid keys otherwise."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise ValueError(f"unknown finding kind {key!r}; expected one of {', '.join(KEYS)}") from None
