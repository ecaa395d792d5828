"""Live fragments that poll (`hx-trigger="every 2s"`) until what they show has ended."""

# htmx stops a poll when the response has this status (and still swaps its body).
HTMX_STOP_POLLING = 286


def polled(response, *, done: bool, reload_page: bool = False):
    """The fragment as it is now; once `done`, htmx stops polling (and reloads the whole page, when `reload_page`)."""
    if done:
        response.status_code = HTMX_STOP_POLLING
        if reload_page:
            response["HX-Refresh"] = "true"
    return response
