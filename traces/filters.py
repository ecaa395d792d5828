"""Filters the Traces page and the sessions API share: who (user) and what (metadata)."""

# Each metadata pair is one more containment test: a few are plenty.
MAX_METADATA_FILTERS = 5


def metadata_pairs(values: list[str]) -> list[tuple[str, str]]:
    """`key=value` strings (as typed in the filter form or sent as ?metadata=) into pairs; others ignored."""
    pairs = []
    for raw in values[:MAX_METADATA_FILTERS]:
        key, sep, value = raw.partition("=")
        if sep and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def by_user_and_metadata(sessions, params):
    """?user=ID and ?metadata=key=value (repeatable, all must match)."""
    if user := params.get("user", "").strip():
        sessions = sessions.filter(user_id=user)
    for key, value in metadata_pairs(params.getlist("metadata")):
        sessions = sessions.with_metadata(key, value)
    return sessions
