class ReviewError(ValueError):
    """A refused queue, rubric or label; the message names the field (the API answers `status_code` with `field`)."""

    status_code = 400

    def __init__(self, field: str, message: str, status_code: int | None = None):
        super().__init__(message)
        self.field = field
        self.response_fields = {"field": field}
        if status_code is not None:
            self.status_code = status_code


class Taken(ReviewError):
    """The item was labelled as often as the queue asks while this reviewer held it (or they labelled it already)."""

    status_code = 409
