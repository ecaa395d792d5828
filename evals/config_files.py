"""Config files (`bv evals run -f`, `bv suites run -f`): YAML, or JSON, which is YAML, read with the bounded loader."""

from belvedir_cli import yamlsafe


def read_fields(text: str, *, allowed: set[str], what: str, hint: str, error: type[Exception]) -> dict:
    """The file's mapping of fields, each one of `allowed`; `error` naming what is wrong (`what` the file is, `hint` its main fields)."""
    try:
        data = yamlsafe.load(text)
    except yamlsafe.YAMLRefused as exc:
        raise error(f"The {what} {exc}.") from None
    if not isinstance(data, dict):
        raise error(f"The {what} must be a mapping of fields ({hint}).")
    if unknown := set(data) - allowed:
        raise error(f"Unknown {what} fields: {', '.join(sorted(unknown))}. Allowed: {', '.join(sorted(allowed))}.")
    return data
