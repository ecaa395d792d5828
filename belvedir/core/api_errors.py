"""The one place that turns domain errors into HTTP answers for the API.

A domain error opts in with a class attribute `status_code` (402 for a short
balance, 409 for a conflict, 400 for a refused request); its message becomes
`detail`, and `response_fields` (when it has them) join the body. Views let
such errors propagate instead of catching and mapping them each time.
"""

from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback


def exception_handler(exc, context):
    status_code = getattr(exc, "status_code", None)
    if isinstance(exc, APIException) or not isinstance(status_code, int):
        return drf_exception_handler(exc, context)
    set_rollback()  # as DRF does for its own errors: an atomic request's writes go
    body = {"detail": getattr(exc, "message", None) or str(exc), **getattr(exc, "response_fields", {})}
    return Response(body, status=status_code)


class Conflict(APIException):
    status_code = 409
    default_detail = "The object is in use."
