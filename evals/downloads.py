import io
import json

from django.http import Http404, HttpResponse

from belvedir.core.csvsafe import SafeWriter

FIELDS = ["row_index", "input", "output", "extracted", "reference", "score", "error", "latency_ms", "prompt_tokens", "completion_tokens"]


def samples_jsonl(samples) -> str:
    return "".join(json.dumps({f: getattr(s, f) for f in FIELDS}) + "\n" for s in samples.iterator())


def samples_csv(samples) -> str:
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(FIELDS)
    for s in samples.iterator():
        writer.writerow([getattr(s, f) for f in FIELDS])
    return out.getvalue()


# The formats offered, and the only ones served: the format names the file,
# so a name taken from the URL as it came would put the client's text in the
# Content-Disposition header.
FORMATS = {"jsonl": (samples_jsonl, "application/x-ndjson"), "csv": (samples_csv, "text/csv")}


def samples_file(samples, fmt: str, filename: str | None = None) -> HttpResponse:
    """The samples in one of FORMATS (404 for anything else), as an attachment when given a filename."""
    if fmt not in FORMATS:
        raise Http404("Samples download as csv or jsonl.")
    render, content_type = FORMATS[fmt]
    response = HttpResponse(render(samples), content_type=content_type)
    if filename:
        response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response
