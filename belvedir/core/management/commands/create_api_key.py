from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from belvedir.core.actions import create_account, ensure_default_project
from belvedir.core.models import ApiKey, Project


class Command(BaseCommand):
    help = "Create an API key for a user and print it (the only time it is shown)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--project", help="Project name (default: the user's first project).")
        parser.add_argument("--create", action="store_true", help="Create the user (no password) and the project if missing.")
        parser.add_argument("--name", default="command line")
        parser.add_argument("--scope", choices=ApiKey.Scope.values, default=ApiKey.Scope.FULL)

    def handle(self, *args, username, project, create, name, scope, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"No user {username!r}; pass --create to create one.")
            try:
                user = create_account(username=username, password=None)
            except ValidationError as exc:
                raise CommandError(exc.messages[0]) from None
        if project:
            chosen = Project.objects.for_user(user).filter(name=project).first()
            if chosen is None and create:
                chosen = Project.objects.create(name=project)
                chosen.memberships.create(user=user, role="owner")
            elif chosen is None:
                raise CommandError(f"{username} is not a member of a project named {project!r}; pass --create to create it.")
        else:
            chosen = ensure_default_project(user)
        _, raw = ApiKey.issue(project=chosen, user=user, name=name, scope=scope)
        self.stdout.write(raw)
