import io
import json

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
