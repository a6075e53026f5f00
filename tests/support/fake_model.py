"""A fake OpenAI-compatible Chat Completions server on loopback, for the LLM agent's tests.

A real HTTP server (the agent talks to it through the official `openai` package), scripted
per request and recording what it was sent. Like the Agents SDK's `ScriptedModel`, it
fails loudly: a request beyond the script is answered 500 and recorded as unexpected,
and `unused()` says what the script still held. A *quirk profile* makes it answer as a
local server does: `llamacpp` sends tool-call arguments as an object, `ollama` ignores
`tool_choice` (its first answer is text, no tool call), `vllm` puts several tool calls in
one message (a read before each action). A hostile server echoes the key it was sent:
`ECHO_KEY` in a scripted answer's text or arguments becomes the request's bearer token.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ECHO_KEY = "{{the key this request was sent with}}"
Turn = dict[str, Any] | list[dict[str, Any]] | Callable[[dict[str, Any]], Any]
# a turn: {"tool": name, "arguments": {...}} | {"text": "..."} | several calls | f(request) -> a turn
# | a broken answer: {"raw": body, "content_type": ...}, {"choices": [...]} (a completion as
# given), either with "trickle_s": seconds between its bytes


class FakeModel:
    def __init__(self, script: list[Turn], quirks: str = "openai") -> None:
        self.script, self.quirks = list(script), quirks
        self.requests: list[dict[str, Any]] = []  # each: the body, and the Authorization header
        self.unexpected: list[dict[str, Any]] = []
        self._said_text = False
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer = model.answer(body, self.headers.get("Authorization", ""))
                raw = answer.get("raw")
                data = json.dumps(answer).encode() if raw is None else raw.encode()
                self.send_response(status)
                self.send_header("Content-Type", answer.get("content_type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for index in range(len(data)):  # a stalled server trickles its answer
                    if answer.get("trickle_s"):
                        time.sleep(answer["trickle_s"])
                    self.wfile.write(data[index : index + 1])
                    self.wfile.flush()
                    if not answer.get("trickle_s"):
                        self.wfile.write(data[index + 1 :])
                        break

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, body: dict[str, Any], authorization: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append({"body": body, "authorization": authorization})
            if self.quirks == "ollama" and not self._said_text:  # tool_choice "required" ignored
                self._said_text = True
                return 200, self._completion(body, [], "I will call the tool now.")
            if not self.script:
                self.unexpected.append(body)
                return 500, {
                    "error": {"message": "the fake model's script is used up", "type": "server_error"}
                }
            turn = self.script.pop(0)
        while callable(turn):
            turn = turn(body)
        if isinstance(turn, dict) and ("raw" in turn or "trickle_s" in turn or "choices" in turn):
            return 200, turn  # a malformed or stalled answer, sent as given
        calls = turn if isinstance(turn, list) else [] if "text" in turn else [turn]
        if self.quirks == "vllm" and calls and calls[0]["tool"] != "list_todos":
            calls = [{"tool": "list_todos", "arguments": {}}, *calls]
        text = turn.get("text") if isinstance(turn, dict) else None
        key = authorization.removeprefix("Bearer ")
        echoed = json.loads(
            json.dumps({"calls": calls, "text": text}).replace(ECHO_KEY, json.dumps(key)[1:-1])
        )
        return 200, self._completion(body, echoed["calls"], echoed["text"])

    def _completion(
        self, body: dict[str, Any], calls: list[dict[str, Any]], text: str | None
    ) -> dict[str, Any]:
        tool_calls = [
            {
                "id": f"call_{len(self.requests)}_{index}",
                "type": "function",
                "function": {
                    "name": call["tool"],
                    "arguments": call["arguments"]
                    if self.quirks == "llamacpp"
                    else json.dumps(call["arguments"]),
                },
            }
            for index, call in enumerate(calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": len(json.dumps(body["messages"])) // 4,
                "completion_tokens": 10 + 5 * len(tool_calls),
                "total_tokens": len(json.dumps(body["messages"])) // 4 + 10 + 5 * len(tool_calls),
            },
        }

    def unused(self) -> int:
        return len(self.script)

    def texts(self, index: int) -> str:
        """Every message's content of request `index`, joined (what the model read)."""
        messages = self.requests[index]["body"]["messages"]
        return "\n".join(str(m.get("content") or "") for m in messages)
