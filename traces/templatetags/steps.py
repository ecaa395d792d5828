"""A step's texts and messages as HTML, in Python: a page of 50 steps has hundreds of them, and an `{% include %}` each was most of the page's time."""

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

register = template.Library()

# Past this a text is folded: its opening and its length shown, the whole of it a click away (a <details>, no JavaScript).
FOLD_CHARS = 2000
PREVIEW_CHARS = 160


@register.filter
def fold(text):
    if not text:
        return ""
    text = str(text)
    if len(text) <= FOLD_CHARS:
        return format_html('<pre tabindex="0">{}</pre>', text)
    preview = text[:PREVIEW_CHARS].rstrip() + "…"
    return format_html(
        '<details class="fold"><summary><span class="muted">{} characters, folded:</span> <code>{}</code></summary><pre tabindex="0">{}</pre></details>',
        len(text),
        preview,
        text,
    )


@register.simple_tag
def message(m, default_role, side=""):
    """One chat message: its role, what it answers, its reasoning, content and tool calls."""
    head = format_html("<p><strong>{}{}</strong>", m.get("role") or default_role, side)
    if m.get("tool_call_id"):
        head += format_html(' <span class="muted">result of tool call <code>{}</code></span>', m["tool_call_id"])
    if m.get("finish_reason"):
        head += format_html(' <span class="muted">· {}</span>', m["finish_reason"])
    parts = [head, mark_safe("</p>")]
    if m.get("reasoning"):
        parts.append(format_html('<details><summary class="muted">Reasoning</summary>{}</details>', fold(m["reasoning"])))
    parts.append(fold(m.get("content")))
    parts.append(
        format_html_join(
            "",
            '<p class="tool-call">Tool call <strong>{}</strong>{}</p>{}',
            (
                (
                    call.get("name", ""),
                    format_html(' <span class="muted"><code>{}</code></span>', call["id"]) if call.get("id") else "",
                    fold(call.get("arguments")),
                )
                for call in m.get("tool_calls") or []
            ),
        )
    )
    return format_html('<div class="message">{}</div>', mark_safe("".join(str(p) for p in parts)))
