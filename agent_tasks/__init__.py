"""Agent tasks: task sets in Harbor's directory format (task.toml, instruction.md, environment/, tests/, solution/),
imported from an archive or a folder and versioned by the content hash of their files.

- `harbor_format`: one task directory, parsed and checked against Harbor's task.toml schema;
- `archive`: an uploaded .tar.gz or .zip read into {path: bytes}, refusing what could escape or inflate;
- `actions`: the one import, all or nothing; `models`, `api`, `views`: the rest.
"""
