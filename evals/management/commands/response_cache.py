from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count, Max, Min, Sum

from evals.models import CachedResponse
from evals.response_cache import evict


class Command(BaseCommand):
    help = (
        "The response cache (evals/response_cache.py): `stats` lists each project's cached answers, "
        "`clear` removes them (all, a project's or a deployment's), `evict` removes those past their time to live "
        "or over BELVEDIR_RESPONSE_CACHE_MAX_MB, as every eval pass does."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        commands.add_parser("stats", help="Each project's cached answers: how many, their size, hits, oldest and newest.")
        clear = commands.add_parser("clear", help="Remove cached answers; the next eval asks the deployment again.")
        which = clear.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", action="store_true", help="Every project's.")
        which.add_argument("--project", type=int, help="A project's (its id).")
        which.add_argument("--deployment", type=int, help="A deployment's (its id).")
        evicting = commands.add_parser("evict", help="Expired answers, then the least recently used past the cap.")
        evicting.add_argument("--project", type=int, help="Only this project (default: every project with cached answers).")

    def handle(self, *args, command, **options):
        getattr(self, command)(**options)

    def stats(self, **options):
        rows = (
            CachedResponse.objects.values("project_id")
            .annotate(answers=Count("pk"), size=Sum("size"), hits=Sum("hits"), oldest=Min("created_at"), newest=Max("created_at"))
            .order_by("project_id")
        )
        if not rows:
            self.stdout.write("The response cache is empty.")
        for row in rows:
            self.stdout.write(
                f"project {row['project_id']}: {row['answers']:,} answers, {row['size'] / 1e6:.1f} MB, {row['hits']:,} hits, "
                f"kept {row['oldest']:%Y-%m-%d %H:%M} to {row['newest']:%Y-%m-%d %H:%M}"
            )

    def clear(self, *, project, deployment, **options):  # --all: neither given
        answers = CachedResponse.objects.all()
        if project is not None:
            answers = answers.filter(project_id=project)
        elif deployment is not None:
            answers = answers.filter(deployment_id=deployment)
        removed = answers.delete()[0]
        self.stdout.write(f"Removed {removed:,} cached answers.")

    def evict(self, *, project, **options):
        if project is not None and not CachedResponse.objects.filter(project_id=project).exists():
            raise CommandError(f"Project {project} has no cached answers.")
        projects = [project] if project is not None else CachedResponse.objects.values_list("project_id", flat=True).distinct()
        removed = sum(evict(pk) for pk in projects)
        self.stdout.write(f"Evicted {removed:,} cached answers.")
