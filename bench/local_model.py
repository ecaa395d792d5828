"""The local model server against its own runtime: throughput, concurrency, per-request overhead.

In the same run, on the same prompts, at temperature 0 (so both produce the same tokens):
- runtime: `Runtime.generate` called in this process, the model's own speed;
- server: `manage.py serve_local_model` in a subprocess, over HTTP (aiohttp client,
  non-streamed chat completions), one request at a time: tokens/s and its
  ratio to the runtime's (target >= 0.9);
- 1, 2 and 4 requests in flight: tokens/s (the model runs one sequence at a
  time, so more in flight only queues; the figure shows the queue costs nothing);
- overhead: median wall time of a 1-token completion over HTTP minus the same
  in process (target <= 5 ms).

Usage: .venv/bin/python bench/local_model.py [--rounds 3] [--max-tokens 64]
Needs the weights (`manage.py install_local_model`).
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from belvedir.localmodel import files  # noqa: E402
from belvedir.localmodel.runtime import Finish, Runtime, Sampling  # noqa: E402

PROMPTS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain photosynthesis to a child.",
    "List three uses of a paperclip.",
]


def runtime_run(runtime: Runtime, prompt: str, max_tokens: int) -> tuple[int, float]:
    started = time.perf_counter()
    tokens = runtime.tokenize(runtime.chat_prompt([("user", prompt)]))
    finish = [event for event in runtime.generate(tokens, Sampling(max_tokens=max_tokens, temperature=0)) if isinstance(event, Finish)][0]
    return finish.completion_tokens, time.perf_counter() - started


async def server_run(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int) -> tuple[int, float]:
    body = {"model": files.MODEL_ID, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": max_tokens}
    started = time.perf_counter()
    async with session.post(f"{url}/chat/completions", json=body) as response:
        reply = await response.json()
    assert response.status == 200, reply
    return reply["usage"]["completion_tokens"], time.perf_counter() - started


async def in_flight(url: str, concurrency: int, rounds: int, max_tokens: int) -> float:
    """Tokens/s with `concurrency` clients each sending the prompts `rounds` times."""
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()

        async def client():
            total = 0
            for _ in range(rounds):
                for prompt in PROMPTS:
                    total += (await server_run(session, url, prompt, max_tokens))[0]
            return total

        tokens = sum(await asyncio.gather(*(client() for _ in range(concurrency))))
        return tokens / (time.perf_counter() - started)


async def measure(runtime: Runtime, url: str, rounds: int, max_tokens: int, overhead_runs: int) -> dict:
    # Each request is run in process and over HTTP back to back, so a change in the
    # machine's load (it is shared) weighs on both sides of a ratio alike.
    async with aiohttp.ClientSession() as session:
        await server_run(session, url, PROMPTS[0], 4)  # warm: the first decode allocates buffers
        runtime_run(runtime, PROMPTS[0], 4)
        totals = {"runtime": [0, 0.0], "server": [0, 0.0]}
        for round_ in range(rounds):
            for prompt in PROMPTS:
                # Which side goes first alternates by round: neither always follows the other.
                for side in ("runtime", "server")[:: 1 if round_ % 2 == 0 else -1]:
                    if side == "runtime":
                        count, seconds = runtime_run(runtime, prompt, max_tokens)
                    else:
                        count, seconds = await server_run(session, url, prompt, max_tokens)
                    totals[side][0] += count
                    totals[side][1] += seconds
        pairs = [(runtime_run(runtime, PROMPTS[0], 1)[1], (await server_run(session, url, PROMPTS[0], 1))[1]) for _ in range(overhead_runs)]
    figures = {side: count / seconds for side, (count, seconds) in totals.items()}
    figures["tokens"] = {side: count for side, (count, _) in totals.items()}
    figures["one_token"] = (statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs), statistics.median(b - a for a, b in pairs))
    for concurrency in (1, 2, 4):
        figures[f"in_flight_{concurrency}"] = await in_flight(url, concurrency, max(1, rounds // concurrency), max_tokens)
    return figures


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "belvedir.settings"}
    command = [sys.executable, "manage.py", "serve_local_model", "--port", str(port)]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in server.stdout:
        if line.startswith("Serving "):
            return server
    raise SystemExit(f"the server did not start (exit {server.wait()})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--overhead-runs", type=int, default=30)
    parser.add_argument("--port", type=int, default=8019)
    args = parser.parse_args()
    # Where settings.LOCAL_MODEL_DIR is, without loading Django here.
    path = files.verify(files.model_path(Path(os.environ.get("BELVEDIR_VAR_DIR", ROOT / "var")) / "models"))
    print(
        f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; {len(PROMPTS)} chat prompts x {args.rounds} rounds, max_tokens {args.max_tokens}, temperature 0"
    )

    server = start_server(args.port)
    runtime = Runtime(path)
    try:
        figures = asyncio.run(measure(runtime, f"http://127.0.0.1:{args.port}/v1", args.rounds, args.max_tokens, args.overhead_runs))
    finally:
        server.terminate()
        server.wait(30)
        runtime.close()
    tokens = figures["tokens"]
    assert tokens["runtime"] == tokens["server"], f"not the same work: {tokens}"

    print(f"runtime in process:       {figures['runtime']:6.1f} tokens/s ({tokens['runtime']} tokens)")
    print(f"server, 1 at a time:      {figures['server']:6.1f} tokens/s, ratio {figures['server'] / figures['runtime']:.3f} (target >= 0.9)")
    for concurrency in (1, 2, 4):
        print(f"server, {concurrency} in flight:      {figures[f'in_flight_{concurrency}']:6.1f} tokens/s")
    runtime_ms, server_ms, overhead_ms = (value * 1000 for value in figures["one_token"])
    print(
        f"1-token chat request, median of {args.overhead_runs}: runtime {runtime_ms:.1f} ms, server {server_ms:.1f} ms, overhead {overhead_ms:.1f} ms (target <= 5 ms)"
    )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
