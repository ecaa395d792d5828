from django.contrib import admin
from django.core.exceptions import PermissionDenied

from belvedir.core.admin import ProjectAdmin
from belvedir.core.errors import TeamError
from belvedir.core.forms import project_balance_cents
from belvedir.core.models import Project
from belvedir.core.money import dollars

from .actions import delete_project

admin.site.unregister(Project)


@admin.register(Project)
class DeletableProjectAdmin(ProjectAdmin):
    """Core's project admin, deleting through the one way a project is deleted (it needs every app)."""

    def get_deleted_objects(self, objs, request):
        # The confirmation page says what stays: the account is detached, not deleted.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        for project in objs:
            deleted.append(
                f"Kept, detached from the project: its ledger, top-ups and coupon redemptions; "
                f"its balance of {dollars(project_balance_cents(project))} is forfeited (refused while in debt)."
            )
        return deleted, counts, perms_needed, protected

    # Through the one way a project is deleted: it waits for trace ingest
    # (spans have no foreign key to stop a batch landing mid-delete) and is
    # refused while the project's work runs in a sandbox or its account is in
    # debt. The confirmation page showed the balance, which staff forfeit.
    def delete_model(self, request, obj):
        try:
            delete_project(obj, forfeit_cents=max(project_balance_cents(obj), 0))
        except TeamError as exc:
            raise PermissionDenied(str(exc)) from None

    def get_actions(self, request):
        # One project at a time: a refusal part-way through a bulk delete
        # would leave the projects before it deleted.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions
