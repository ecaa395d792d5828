class TeamError(Exception):
    """A refused change to a project's members; `status_code` is what the API answers."""

    status_code = 400

    def __init__(self, message, status_code=None):
        super().__init__(message)
        if status_code is not None:
            self.status_code = status_code


class NotFound(TeamError):
    status_code = 404


class Gone(TeamError):
    """An invitation that expired or was already used."""

    status_code = 410
