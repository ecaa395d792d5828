"""Agent tasks: task sets in Harbor's directory format (task.toml, instruction.md, environment/, tests/, solution/),
imported from an archive or a folder and versioned by the content hash of their files.

- `harbor_format`: one task directory, parsed and checked against Harbor's task.toml schema;
- `archive`: an uploaded .tar.gz or .zip read into {path: bytes}, refusing what could escape or inflate;
- `actions`: the one import, all or nothing; `models`, `api`, `views`: the rest;
- `environment`: a task's Dockerfile resolved without a build (the offline stand-in: FROM the sandbox image, WORKDIR,
  ENV, COPY); `trials`: one agent's trial of one task in a sandbox of its own (owner kind `trial`), and the built-in
  agents `oracle` and `nop`.
"""
