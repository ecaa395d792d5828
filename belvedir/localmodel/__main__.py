"""`python -m belvedir.localmodel MODEL.gguf [--adapter LORA.gguf]`: the server without Django.

(In a sandbox the package is mounted as `localmodel`: `python3 -m localmodel …`.)

For a sandbox that benchmarks an adapter on CPU (drivers/local-model/): the
platform mounts this package, its Python packages and the model read-only,
and the driver serves base and adapter side by side, as vLLM's
`--lora-modules` does on a GPU host. `manage.py serve_local_model` is the
platform's own way in: it checks the weights against their pinned SHA-256
first.
"""

import argparse
import sys
from pathlib import Path

from .runtime import AdapterError, Runtime
from .server import serve_until_signalled


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="The model's GGUF file.")
    parser.add_argument("--model-id", required=True, help="The name the base model is served under.")
    parser.add_argument("--adapter", type=Path, help="A LoRA adapter in GGUF, served beside the base model.")
    parser.add_argument("--adapter-id", default="candidate", help="The name the adapter is served under (default: candidate).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--n-ctx", type=int, default=0, help="Context length in tokens (0: the model's own).")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--queue", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        runtime = Runtime(args.model, n_ctx=args.n_ctx, n_threads=args.threads, adapter=args.adapter)
    except (AdapterError, RuntimeError) as exc:
        sys.exit(f"error: {exc}")

    def ready(url: str):
        served = f"{args.model_id} and {args.adapter_id} (its adapter)" if args.adapter else args.model_id
        print(f"Serving {served} at {url}.", flush=True)

    try:
        serve_until_signalled(
            runtime, args.model_id, adapter_id=args.adapter_id if args.adapter else "", host=args.host, port=args.port, queue_size=args.queue, ready=ready
        )
    except OSError as exc:
        sys.exit(f"error: cannot serve on {args.host}:{args.port}: {exc}")
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
