import contextlib
import json
import os
from pathlib import Path

import click
import httpx

DEFAULT_BASE_URL = "http://127.0.0.1:8000"


class ApiError(click.ClickException):
    """Printed as the API's message; exit code 2."""

    exit_code = 2


def config_path() -> Path:
    return Path(click.get_app_dir("belvedir")) / "config.json"


def load_config() -> dict:
    try:
        return json.loads(config_path().read_text())
    except (OSError, ValueError):
        return {}


def save_config(api_key: str, base_url: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created 600 from the start: the key is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"api_key": api_key, "base_url": base_url}, f)
    os.chmod(path, 0o600)
    return path


class Client:
    def __init__(self, api_key: str | None = None, base_url: str | None = None):
        config = load_config()
        self.api_key = api_key or os.environ.get("BELVEDIR_API_KEY") or config.get("api_key")
        self.base_url = (base_url or os.environ.get("BELVEDIR_BASE_URL") or config.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
        if not self.api_key:
            raise ApiError("No API key: set BELVEDIR_API_KEY or run `bv login`.")
        self.http = httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=60)

    def request(self, method: str, path: str, **kwargs):
        try:
            response = self.http.request(method, f"/api/v1/{path}", **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"Cannot reach Belvedir at {self.base_url}: {exc}") from None
        if response.status_code >= 400:
            raise ApiError(f"{response.status_code}: {_message(response)}")
        return response.json() if response.content and "json" in response.headers.get("content-type", "") else response.text

    @contextlib.contextmanager
    def stream(self, path: str, **params):
        """A streamed GET (an export): yields the response to read with iter_bytes()."""
        try:
            with self.http.stream("GET", f"/api/v1/{path}", params=params or None, timeout=httpx.Timeout(60, read=600)) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError(f"{response.status_code}: {_message(response)}")
                yield response
        except httpx.HTTPError as exc:
            raise ApiError(f"Cannot reach Belvedir at {self.base_url}: {exc}") from None

    def upload(self, path: str, body, progress=None):
        """POST a streamed multipart body (see upload.MultipartFile)."""
        headers = {"Content-Type": body.content_type, "Content-Length": str(body.length)}
        return self.request("POST", path, content=body.chunks(progress), headers=headers, timeout=httpx.Timeout(60, write=600, read=600))

    def delete(self, path):
        return self.request("DELETE", path)

    def get(self, path, **params):
        return self.request("GET", path, params=params or None)

    def post(self, path, payload=None):
        return self.request("POST", path, json=payload)

    def all(self, path, at_most=None, **params):
        """Every item of a list endpoint (or its first `at_most`), following pagination."""
        body = self.get(path, **params)
        if isinstance(body, list):
            return body[:at_most]
        items = list(body["results"])
        while body.get("next") and (at_most is None or len(items) < at_most):
            body = self.request("GET", body["next"].split("/api/v1/", 1)[1])
            items += body["results"]
        return items[:at_most]


def _message(response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    if isinstance(body, dict):
        return "; ".join(f"{field}: {' '.join(map(str, errors)) if isinstance(errors, list) else errors}" for field, errors in body.items())
    return str(body)
