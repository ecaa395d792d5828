from rest_framework.exceptions import APIException


def api_error(exc) -> APIException:
    """A domain error (it carries `status_code`) as the DRF exception the API answers with."""
    error = APIException(str(exc))
    error.status_code = getattr(exc, "status_code", 400)
    return error


class Conflict(APIException):
    status_code = 409
    default_detail = "The object is in use."
