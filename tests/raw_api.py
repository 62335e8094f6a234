"""The app's API over plain HTTP (Gradio's /call route), for payloads gradio_client cannot send.

gradio_client refuses NaN and lone surrogates before anything leaves the machine; a hostile
visitor's own client does not. Here the JSON body is written with `json.dumps` (which writes
NaN and Infinity, and escapes a lone surrogate as \\udXXX), posted to
/gradio_api/call/<endpoint>, and the answer read from that event's stream.
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
