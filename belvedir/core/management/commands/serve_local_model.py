from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from belvedir.localmodel import files


class Command(BaseCommand):
    help = "Serve the local model (SmolLM2-135M-Instruct) with an OpenAI-compatible API, after checking its weights."
    # It touches neither the database nor secrets: a machine that only serves the model needs no SECRET_KEY.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8001)
        parser.add_argument("--n-gpu-layers", type=int, default=0, help="Layers offloaded to a GPU (a CPU-only llama.cpp build ignores it).")
        parser.add_argument("--queue", type=int, default=64, help="Requests that may wait for the model; one more is answered 429.")
        # The model's whole context by default: 2,048 refused math500's and IFBench's requests (2,048 tokens to complete after the prompt).
        parser.add_argument(
            "--n-ctx", type=int, default=0, help="Context length in tokens, prompt and completion together (0: the model's own, 8,192 for SmolLM2)."
        )
        parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: every core).")

    def handle(self, *args, host, port, n_gpu_layers, queue, n_ctx, threads, **options):
        if queue < 1:
            # asyncio reads a queue of size 0 as unbounded: the opposite of what it would mean here.
            raise CommandError("--queue must be at least 1.")
        try:
            path = files.verify(files.model_path(settings.LOCAL_MODEL_DIR))
        except files.ModelFileError as exc:
            raise CommandError(str(exc)) from None
        # Imported only once the weights are known good: it loads llama.cpp's library.
        from belvedir.localmodel import runtime, server

        model = runtime.Runtime(path, n_ctx=n_ctx, n_threads=threads, n_gpu_layers=n_gpu_layers)
        if n_gpu_layers and not runtime.supports_gpu_offload():
            self.stderr.write(f"--n-gpu-layers {n_gpu_layers}: this llama.cpp build has no GPU support; the model runs on the CPU.")

        def ready(url: str):
            self.stdout.write(f"Serving {files.MODEL_ID} at {url} (context {model.n_ctx} tokens, {model.n_threads} threads, queue {queue}).")
            self.stdout.flush()

        try:
            server.serve_until_signalled(model, files.MODEL_ID, host=host, port=port, queue_size=queue, ready=ready)
        except OSError as exc:
            raise CommandError(f"Cannot serve on {host}:{port}: {exc}") from None
        finally:
            model.close()
