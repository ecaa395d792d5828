from django.core.management.base import BaseCommand, CommandError

from evals.models import Deployment
from harnesses.models import Preset
from harnesses.smoke import smoke


class Command(BaseCommand):
    help = (
        "Run every preset with its smallest subset (BELVEDIR_LIMIT=1) against a deployment and print pass or fail per "
        "driver with the reason. For installations whose sandboxes reach the internet; runs are charged to the "
        "deployment's project."
    )

    def add_arguments(self, parser):
        parser.add_argument("--deployment", required=True, help="Name of the deployment (model endpoint) to use.")
        parser.add_argument("--project", help="The deployment's project, when several projects have one of that name.")
        parser.add_argument("--only", default="", help="Comma-separated preset slugs (default: all).")
        parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="Extra env var for every run (repeatable), e.g. HF_TOKEN=…")
        parser.add_argument("--time-limit", type=int, default=1800, help="Seconds per run (default 1800).")

    def handle(self, *args, **options):
        deployments = Deployment.objects.filter(name=options["deployment"]).select_related("project")
        if options["project"]:
            deployments = deployments.filter(project__name=options["project"])
        if len(deployments) != 1:
            raise CommandError(f"{len(deployments)} deployments named {options['deployment']!r}; name exactly one (use --project).")
        deployment = deployments[0]
        # Run as the project's first owner ("owner" sorts after "member").
        membership = deployment.project.memberships.select_related("user").order_by("-role", "created_at").first()
        if membership is None:
            raise CommandError("The deployment's project has no members to run as.")
        env = {}
        for item in options["env"]:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise CommandError(f"--env takes NAME=VALUE, not {item!r}.")
            env[name] = value
        presets = list(Preset.objects.all())
        if options["only"]:
            wanted = {s.strip() for s in options["only"].split(",") if s.strip()}
            unknown = wanted - {p.slug for p in presets}
            if unknown:
                raise CommandError(f"No preset {', '.join(sorted(unknown))}.")
            presets = [p for p in presets if p.slug in wanted]
        failed = 0
        for preset in presets:
            self.stdout.write(f"…     {preset.slug:<16} running")
            result = smoke(preset, deployment, membership.user, env, options["time_limit"])
            failed += not result.passed
            self.stdout.write(f"{'PASS' if result.passed else 'FAIL'}  {preset.slug:<16} {result.reason}")
        self.stdout.write(f"{len(presets) - failed} passed, {failed} failed")
        if failed:
            raise SystemExit(1)
