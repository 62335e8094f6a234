"""The app's API over plain HTTP, for payloads gradio_client cannot send.

gradio_client refuses NaN and lone surrogates before anything leaves the machine; a hostile
visitor's own client does not. Here the JSON body is written with `json.dumps` (which writes
NaN and Infinity, and escapes a lone surrogate as \\udXXX), posted to
/gradio_api/call/<endpoint> and the answer read from that event's stream (`call`), or posted
to any event by its index as the page does (`join` for a queued event, `run` for an unqueued one).
"""

from __future__ import annotations

import json

import httpx

TIMEOUT_S = 60


def call(url: str, endpoint: str, args: list, headers: dict | None = None) -> tuple[bool, object]:
    """(True, outputs) for a result, (False, message) for an error; message None when Gradio gave none."""
    base = f"{url.rstrip('/')}/gradio_api/call/{endpoint.strip('/')}"
    with httpx.Client(timeout=TIMEOUT_S, headers=headers) as http:
        posted = http.post(base, content=json.dumps({"data": list(args)}), headers={"Content-Type": "application/json"})
        if posted.status_code != 200:
            return False, f"HTTP {posted.status_code}: {posted.text}"
        event, data = None, None
        with http.stream("GET", f"{base}/{posted.json()['event_id']}") as stream:
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    data = line.split(":", 1)[1].strip()
                    if event in ("complete", "error"):
                        break
    decoded = None if data in (None, "", "null") else json.loads(data)
    if event != "complete" and isinstance(decoded, dict):  # Gradio's error payload: {"error": message, ...}
        decoded = decoded.get("error")
    return event == "complete", decoded


def join(url: str, fn_index: int, args: list, event_data=None, session_hash: str = "raw-api",
         headers: dict | None = None) -> tuple[int, bool, object]:
    """An event by its index, as the page sends a queued one: /gradio_api/queue/join, then the session's
    event stream. (HTTP status, success, outputs or message); a refused join is (status, False, detail)."""
    base = url.rstrip("/") + "/gradio_api"
    body = {"data": list(args), "fn_index": fn_index, "session_hash": session_hash, "event_data": event_data,
            "trigger_id": None}
    with httpx.Client(timeout=TIMEOUT_S, headers=headers) as http:
        posted = http.post(f"{base}/queue/join", content=json.dumps(body), headers={"Content-Type": "application/json"})
        if posted.status_code != 200:
            return posted.status_code, False, _detail(posted)
        event_id = posted.json()["event_id"]
        with http.stream("GET", f"{base}/queue/data", params={"session_hash": session_hash}) as stream:
            for line in stream.iter_lines():
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("msg") == "process_completed" and message.get("event_id") == event_id:
                    output = message.get("output") or {}
                    return 200, bool(message.get("success")), output.get("data") if message.get("success") \
                        else output.get("error")
    return 200, False, None  # the stream ended without the event's answer


def run(url: str, fn_index: int, args: list, event_data=None, session_hash: str = "raw-api",
        headers: dict | None = None) -> tuple[int, bool, object]:
    """An unqueued event by its index, as the page sends one: /gradio_api/run/predict.
    (HTTP status, success, outputs or message)."""
    body = {"data": list(args), "fn_index": fn_index, "session_hash": session_hash, "event_data": event_data,
            "trigger_id": None}
    answer = httpx.post(url.rstrip("/") + "/gradio_api/run/predict", content=json.dumps(body), timeout=TIMEOUT_S,
                        headers={"Content-Type": "application/json", **(headers or {})})
    if answer.status_code == 200:
        return 200, True, answer.json().get("data")
    return answer.status_code, False, _detail(answer)


def _detail(answer: httpx.Response):
    """A refusal's words: FastAPI's {"detail": ...}, Gradio's {"error": ...}, or the body itself."""
    try:
        payload = answer.json()
    except ValueError:
        return answer.text
    return payload.get("detail", payload.get("error")) if isinstance(payload, dict) else payload
