"""Uploads are limited while they stream in, not after.

Django's upload handlers spool a file of any size to disk before a view
sees it. `UploadLimitMiddleware` puts a counting handler first on every
request, with the limit of the path (adapters are larger than datasets):
a Content-Length over it is refused before a byte is read, and a body that
grows past it stops being read there. The middleware then answers 413.
It runs before CsrfViewMiddleware, which reads the body of a form POST.
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpResponse, JsonResponse

# Headers and form fields around the file: a multipart body is a little
# larger than the file it carries.
MULTIPART_ALLOWANCE = 64 * 1024


def limit_for(path: str) -> int:
    if path.startswith(("/models", "/api/v1/models")):
        return settings.MODEL_ADAPTER_MAX_BYTES
    return settings.UPLOAD_MAX_BYTES


class LimitedUploadHandler(FileUploadHandler):
    def __init__(self, request, limit: int):
        super().__init__(request)
        self.limit = limit
        self.received = 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.limit + MULTIPART_ALLOWANCE:
            self.request.upload_too_large = self.limit
            # Django's own exception for this: nothing of the body is read.
            raise RequestDataTooBig(f"Upload of {content_length} bytes is over the {self.limit}-byte limit.")

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit:
            self.request.upload_too_large = self.limit
            # connection_reset: the rest of the body is not read, only dropped.
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size):
        return None  # the next handler (memory or temporary file) keeps the file


class UploadLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.upload_handlers.insert(0, LimitedUploadHandler(request, limit_for(request.path)))
        response = self.get_response(request)
        limit = getattr(request, "upload_too_large", None)
        if limit is None:
            return response
        size = f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit // 1024} KB"
        message = f"The upload is larger than the {size} limit."
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=413)
        return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
