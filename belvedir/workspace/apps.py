from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    """The top floor: what composes every app (the home page, `me`, deleting a project).

    belvedir.core is the ground floor every app builds on and imports none of
    them; what needs billing, evals, harnesses and traces together lives here,
    and only this app and the root URL conf know them all.
    """

    name = "belvedir.workspace"
    label = "workspace"
    verbose_name = "Workspace"
