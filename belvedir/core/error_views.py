"""The product's own pages for 400, 403, 404 and 500: the navigation, what went wrong in words, and a way forward.

Views that refuse a request with a reason (a form missing a parameter) answer through `bad_request`, so the reason
reaches a person on a styled page rather than a line of plain text.
"""

from django.http import HttpResponse
from django.shortcuts import render
from django.template import loader

from .scoping import InAnotherProject


def bad_request(request, exception=None, *, message: str = "", back: str = ""):
    message = message or "The request could not be understood: a parameter is missing or malformed."
    return render(request, "400.html", {"message": message, "back": back}, status=400)


def permission_denied(request, exception=None):
    return render(request, "403.html", {"message": str(exception or "")}, status=403)


def csrf_failure(request, reason=""):
    """A form refused by the CSRF check (CSRF_FAILURE_VIEW): the product's 403, saying what to do."""
    message = "This form was refused: it came without the page's security token, or the token expired."
    return render(request, "403.html", {"message": message}, status=403)


def page_not_found(request, exception=None):
    context = {"message": "", "elsewhere": None}
    if isinstance(exception, InAnotherProject):
        context.update(elsewhere=exception.project, message=str(exception))
    elif exception is not None and exception.args and isinstance(exception.args[0], str):
        # The resolver's own 404 carries a dict of the patterns it tried, never shown; a view's carries a sentence.
        context["message"] = exception.args[0]
    return render(request, "404.html", context, status=404)


def server_error(request):
    # No context processors, no queries: the database may be why this page is shown.
    return HttpResponse(loader.get_template("500.html").render({}), status=500)
