"""An agent loop on the ``anthropic`` SDK that reports each step to Repair Loop Tracer as it happens.

It opens a run (``POST /api/runs``), sends every tool call and the final answer as a step
(``POST /api/runs/{id}/steps``) the moment it has its result, and finishes the run
(``POST /api/runs/{id}/finish``); the run's page on the dashboard shows the steps arrive. The
guide is ``docs/api.md``. Offline by default: the model is the project's simulated model, served
to the SDK as an HTTP transport, so it runs without an API key.

    export RLT_API_TOKEN=rlt_…            # from the dashboard's "API tokens" page
    .venv/bin/python examples/report_steps.py --url http://127.0.0.1:8000
    .venv/bin/python examples/report_steps.py --url http://127.0.0.1:8000 --claude   # ANTHROPIC_API_KEY set

The task is lesson 002's refund ticket: the model first sends a wrong order id (a validation error
that lists the known ones), repairs it, and then meets a refusal no retry can change (business,
not retryable), which it explains to the customer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project's simulated model

TASK = "Customer C-204 asks for a refund of order 871. Process it, or tell them why not."
TOOLS = [
    {
        "name": "process_refund",
        "description": "Refund an order in full. Only orders delivered in the last 90 days can be refunded.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "four digits, e.g. 0871"}},
            "required": ["order_id"],
        },
    }
]
ORDERS = {"0871": 239, "1050": 12}  # order id -> days since delivery
MAX_TURNS = 8


def process_refund(order_id: str) -> dict[str, Any]:
    """The tool: ``{"ok": True, …}`` or a structured error (category, retryable, message)."""
    if order_id not in ORDERS:
        known = ", ".join(ORDERS)
        return failure("validation", False, f"order '{order_id}' is not an order of C-204; known orders: {known}.")
    if ORDERS[order_id] > 90:
        message = f"order {order_id} was delivered {ORDERS[order_id]} days ago; refunds are allowed within 90 days"
        return failure("business", False, message)
    return {"ok": True, "refunded": order_id}


def failure(category: str, retryable: bool, message: str) -> dict[str, Any]:
    error = {"isError": True, "errorCategory": category, "isRetryable": retryable, "message": message}
    return {"ok": False, "error": error}


class Tracer:
    """The three calls of the live step API, with the token as ``Authorization: Bearer``."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx2.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post(path, json=body)
        if response.status_code >= 400:  # {"errors": [{"path", "message"}]}
            raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text}")
        return response.json()

    def open(self, **run: Any) -> int:
        return self._post("/api/runs", run)["id"]

    def step(self, run_id: int, step: dict[str, Any]) -> None:
        self._post(f"/api/runs/{run_id}/steps", {"steps": [step]})

    def finish(self, run_id: int, **end: Any) -> dict[str, Any]:
        return self._post(f"/api/runs/{run_id}/finish", end)


def model_client(*, claude: bool) -> tuple[anthropic.Anthropic, str]:
    if claude:
        return anthropic.Anthropic(), os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5")
    from agents.llm.simulated import MODEL_NAME, SimulatedTransport
    from agents.persona import Persona, call

    persona = Persona(opening=(call("process_refund", order_id="871"),))
    http = httpx2.Client(transport=SimulatedTransport(persona))
    return anthropic.Anthropic(api_key="simulated", http_client=http, max_retries=0), MODEL_NAME


def run_agent(tracer: Tracer, *, claude: bool = False) -> dict[str, Any]:
    client, model = model_client(claude=claude)
    run_id = tracer.open(
        scenario="refund-too-old",
        policy="example-structured",
        model=model,
        task=TASK,
        labels={"example": "report_steps"},
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    index = 0
    try:
        for _ in range(MAX_TURNS):
            reply = client.messages.create(model=model, max_tokens=1024, tools=TOOLS, messages=messages)
            messages.append({"role": "assistant", "content": [block.to_dict() for block in reply.content]})
            text = "".join(block.text for block in reply.content if block.type == "text")
            uses = [block for block in reply.content if block.type == "tool_use"]
            tokens = {"input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens}
            if not uses:
                index += 1
                tracer.step(run_id, {"index": index, "kind": "final_answer", "text": text, **tokens})
                return tracer.finish(run_id, stop_reason="final_answer")
            results = []
            for k, use in enumerate(uses):
                started = time.perf_counter()
                outcome = (
                    process_refund(**use.input)
                    if use.name == "process_refund"
                    else failure("validation", False, f"no tool named {use.name}")
                )
                latency_ms = (time.perf_counter() - started) * 1000
                content = json.dumps(outcome)
                results.append(
                    {"type": "tool_result", "tool_use_id": use.id, "content": content, "is_error": not outcome["ok"]}
                )
                error = outcome.get("error") or {}
                index += 1
                tracer.step(
                    run_id,
                    {
                        "index": index,
                        "kind": "tool_use",
                        "tool_name": use.name,
                        "tool_use_id": use.id,
                        "input": use.input,
                        "attempts": [
                            {
                                "number": 1,
                                "ok": outcome["ok"],
                                "content": outcome,
                                "category": error.get("errorCategory"),
                                "retryable": error.get("isRetryable"),
                                "message": error.get("message"),
                                "latency_ms": latency_ms,
                                "result_content": content,
                            }
                        ],
                        # the model's tokens and words belong to the first call of its turn
                        **(tokens | {"text": text} if k == 0 else {}),
                    },
                )
            messages.append({"role": "user", "content": results})
        return tracer.finish(run_id, stop_reason="max_steps")
    except Exception as exc:
        tracer.finish(run_id, stop_reason="crashed", error=f"{type(exc).__name__}: {exc}")
        raise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the dashboard's address")
    parser.add_argument("--token", default=os.environ.get("RLT_API_TOKEN"), help="default: $RLT_API_TOKEN")
    parser.add_argument("--claude", action="store_true", help="the real Anthropic API instead of the simulated model")
    args = parser.parse_args()
    if not args.token:
        parser.error("an API token is needed: --token or RLT_API_TOKEN (make one on the dashboard's API tokens page)")
    run = run_agent(Tracer(args.url, args.token), claude=args.claude)
    print(f"run {run['id']}: {run['step_count']} steps, {run['stop_reason']}: {args.url.rstrip('/')}{run['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
