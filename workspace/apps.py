from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    """The top floor: what composes every app (the home page, `me`, deleting a project).

    belvedir/ (settings, core, the sandbox door) is the ground floor every app
    builds on, and imports none of them; what needs billing, evals, harnesses
    and traces together lives here, above them all, and only this app and the
    root URL conf (belvedir/urls.py) know them all.
    """

    name = "workspace"
    label = "workspace"
    verbose_name = "Workspace"
