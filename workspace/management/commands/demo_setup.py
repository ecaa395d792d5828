import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from belvedir.core.actions import create_account, ensure_default_project
from belvedir.core.models import ApiKey, VerifiedEmail
from belvedir.core.verification import is_verified
from billing.actions import post_entry
from billing.models import Account
from evals.actions import register_local_deployment
from harnesses.local_model import agent_harness

DEMO_USERNAME = "demo"
DEMO_KEY_NAME = "demo (make run)"
# Harness runs are charged at start (a CPU run $0.50): without a credit, the agent harness the
# banner points at answered "Insufficient balance" to a newcomer's first Run.
DEMO_CREDIT_CENTS = 1000


# In the top floor, not in core: it composes apps (the demo project's local deployment is evals').
class Command(BaseCommand):
    help = "Create or refresh the demo login, its API key, its project's local deployment and agent harness, and print them (development only)."

    def add_arguments(self, parser):
        parser.add_argument("--migrate", action="store_true", help="Migrate the database first, in the same process (`make run`: one Python start, not two).")

    def handle(self, *args, **options):
        if options["migrate"]:
            call_command("migrate", interactive=False, verbosity=options["verbosity"])
        self.make_demo()

    @transaction.atomic
    def make_demo(self):
        password = secrets.token_urlsafe(12)
        user = get_user_model().objects.filter(username=DEMO_USERNAME).first()
        if user is None:
            user = create_account(username=DEMO_USERNAME, password=password, email="demo@example.com")
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        # The demo's address is the platform's own: verified, so invitations and resets to it work in `make run`.
        if user.email and not is_verified(user):
            VerifiedEmail.objects.update_or_create(user=user, defaults={"email": user.email})
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
        project = ensure_default_project(user)
        for old in ApiKey.objects.filter(user=user, name=DEMO_KEY_NAME).active():
            old.revoke()
        _, raw = ApiKey.issue(project=project, user=user, name=DEMO_KEY_NAME)
        # The model `make run` serves beside the platform: the demo measures something from its first page.
        local = register_local_deployment(project)
        agent = agent_harness(project, user)
        # Once per project, through the ledger like any credit: a second start finds the entry and adds nothing.
        account = Account.for_project(project)
        post_entry(account, kind="adjustment", amount_cents=DEMO_CREDIT_CENTS, reference=f"demo-credit:{project.pk}", memo="make run's demo credit")
        account.refresh_from_db()
        self.stdout.write(
            self.style.SUCCESS("Demo login (a new password each start):")
            + f"\n  URL:      {settings.BELVEDIR_BASE_URL}/login/"
            + f"\n  username: {DEMO_USERNAME}\n  password: {password}"
            + f"\n  API key:  {raw}"
            + f"\n  balance:  ${account.balance_cents / 100:.2f} (a ${DEMO_CREDIT_CENTS / 100:.2f} demo credit, given once)"
            + f'\n  model:    deployment "{local.name}" ({local.model} at {local.base_url})'
            + (f'\n  agent:    harness "{agent.name}" ({settings.BELVEDIR_BASE_URL}{agent.get_absolute_url()}): press Run\n' if agent else "\n")
        )
