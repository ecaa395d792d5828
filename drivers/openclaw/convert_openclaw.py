"""OpenClaw's `openclaw agent --json` output (NDJSON) into per-task verdicts and results.json.

Each task's stdout is read as NDJSON: every line that is a JSON object is an event; other lines
(log output) are skipped. Progress events (`type` `tool_start`/`tool_result`, or stream-json
`assistant`/`tool_use` messages) count the agent's steps. The final event is the structured
result: OpenClaw's `{"payloads": [{"text": …}], "meta": {"durationMs", "aborted", "error",
"agentMeta": {"sessionId", "provider", "model", "usage": {"input", "output"}}}}`, or a stream-json
`{"type": "result", "subtype", "is_error", "result", "num_turns", "usage"}`.
"""

import json

STEP_TYPES = {"tool_start", "tool_use", "tool_call"}


def parse_stream(text):
    events = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    final = next((e for e in reversed(events) if "payloads" in e or e.get("type") == "result"), None)
    steps = sum(1 for e in events if e.get("type") in STEP_TYPES or _has_tool_use(e))
    parsed = {
        "events": len(events),
        "steps": steps,
        "finished": final is not None,
        "ok": False,
        "answer": "",
        "model": "",
        "input_tokens": 0,
        "output_tokens": 0,
        "error": "",
    }
    if final is None:
        parsed["error"] = "no final result in the agent's output"
        return parsed
    if "payloads" in final:
        meta = final.get("meta") or {}
        agent = meta.get("agentMeta") or {}
        usage = agent.get("usage") or {}
        parsed.update(
            answer="\n".join(p.get("text") or "" for p in final["payloads"]).strip(),
            model=agent.get("model", ""),
            input_tokens=usage.get("input") or 0,
            output_tokens=usage.get("output") or 0,
            error=str(meta.get("error") or ("aborted" if meta.get("aborted") else "")),
        )
        parsed["steps"] = parsed["steps"] or agent.get("turns") or 0
    else:
        usage = final.get("usage") or {}
        parsed.update(
            answer=str(final.get("result") or ""),
            model=final.get("model", ""),
            input_tokens=usage.get("input_tokens") or 0,
            output_tokens=usage.get("output_tokens") or 0,
            error=final.get("subtype", "error") if final.get("is_error") else "",
        )
        parsed["steps"] = final.get("num_turns") or parsed["steps"]
    parsed["ok"] = not parsed["error"]
    return parsed


def _has_tool_use(event):
    message = event.get("message") if event.get("type") == "assistant" else None
    return isinstance(message, dict) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in message.get("content") or [])


def task_row(task, check, parsed, exit_code, check_passed=None, check_output=""):
    """A task's verdict: its check command's exit code, else the agent's own final result."""
    if check:
        verdict = "solved" if check_passed else "failed"
        reason = "check passed" if check_passed else f"check failed: {check_output.strip()[-300:]}"
    elif exit_code == 0 and parsed["ok"]:
        verdict, reason = "solved", "the agent finished without error"
    else:
        verdict, reason = "failed", parsed["error"] or f"openclaw exited with code {exit_code}"
    return {"task": task, "check": check, "verdict": verdict, "steps": parsed["steps"], "reason": reason, "answer": parsed["answer"][:500]}


def convert(rows, model, parsed_runs=()):
    solved = sum(r["verdict"] == "solved" for r in rows)
    return {
        "score": solved / len(rows) if rows else 0.0,
        "model": model or next((p["model"] for p in parsed_runs if p["model"]), ""),
        "total": len(rows),
        "solved": solved,
        "failed": len(rows) - solved,
        "input_tokens": sum(p["input_tokens"] for p in parsed_runs),
        "output_tokens": sum(p["output_tokens"] for p in parsed_runs),
        "tasks": rows,
    }
