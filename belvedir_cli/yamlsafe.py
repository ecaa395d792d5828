"""The one loader for YAML a person writes: the `bv` config files, and the dashboard's suite form.

Here, not in the server's packages, because `bv` ships alone (pyproject
packages only belvedir_cli) and must not import Django; the server imports
this pure module (PyYAML only) so both refuse the same things.

Anchors and aliases are refused: safe_load expands them, so 351 bytes of
nested aliases (the "billion laughs") stored 5.8 MB of JSON from the suite
form, each further line ten times more. No config of ours needs them.
"""

import yaml

MAX_BYTES = 256 * 1024  # before parsing: a config of ours is a few hundred bytes
MAX_DEPTH = 50  # nested mappings and lists; PyYAML's composer recurses per level


class YAMLRefused(ValueError):
    """YAML that is not read; the message says why (and on which line), as a predicate ("is not valid YAML: …")."""


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            raise YAMLRefused(f"uses an alias (*{event.anchor}) on line {line}: anchors and aliases are not accepted, write the value out")
        if getattr(event, "anchor", None):
            raise YAMLRefused(f"defines an anchor (&{event.anchor}) on line {line}: anchors and aliases are not accepted, write the value out")
        self._depth = getattr(self, "_depth", 0) + 1
        if self._depth > MAX_DEPTH:
            raise YAMLRefused(f"nests more than {MAX_DEPTH} levels deep (line {line})")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load(text: str | bytes, *, max_bytes: int = MAX_BYTES):
    """The YAML (or JSON, which is YAML) document in `text`; YAMLRefused when it is too large, invalid, or uses anchors or aliases."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > max_bytes:
        raise YAMLRefused(f"is {size:,} bytes (limit {max_bytes:,})")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)
    except yaml.YAMLError as exc:
        raise YAMLRefused(f"is not valid YAML: {exc}") from None


def load_file(path, *, max_bytes: int = MAX_BYTES):
    """As `load`, reading at most one byte past the limit; OSError when the file cannot be read."""
    with open(path, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YAMLRefused(f"is over {max_bytes:,} bytes (the limit)")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise YAMLRefused("is not UTF-8 text") from None
    return load(text, max_bytes=max_bytes)
