"""Errors as OpenAI's API answers them: a status and `{"error": {"message", "type", "param", "code"}}`.

Every failure a client can see is an APIError by the time it leaves the
server; `from_runtime` maps the runtime's own exceptions, in one place.
"""

from .runtime import ContextLengthExceeded, EmptyPrompt


class APIError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None, code: str | None = None, headers=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def invalid(param: str, message: str) -> APIError:
    return APIError(400, message, param=param)


def model_not_found(model: str) -> APIError:
    return APIError(404, f"The model `{model}` does not exist or you do not have access to it.", param="model", code="model_not_found")


def too_large(limit: int) -> APIError:
    return APIError(413, f"The request body is larger than {limit:,} bytes.", code="request_too_large")


def busy(queued: int, retry_after: int) -> APIError:
    return APIError(
        429,
        f"The model is busy: {queued} requests are already waiting. Retry after {retry_after} s.",
        type="requests",
        code="rate_limit_exceeded",
        headers={"Retry-After": str(retry_after)},
    )


def from_runtime(exc: Exception, prompt_param: str) -> APIError:
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, ContextLengthExceeded):
        return APIError(400, str(exc), param=prompt_param, code="context_length_exceeded")
    if isinstance(exc, EmptyPrompt):
        return invalid(prompt_param, str(exc))
    return APIError(500, f"The model failed: {type(exc).__name__}: {exc}", type="server_error")
