from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from belvedir.core.money import plain_dollars
from belvedir.core.permissions import request_project
from billing.models import Account

MeSerializer = inline_serializer(
    "Me",
    {
        "user": inline_serializer("MeUser", {"id": serializers.IntegerField(), "username": serializers.CharField(), "email": serializers.CharField()}),
        "project": inline_serializer("MeProject", {"id": serializers.IntegerField(), "name": serializers.CharField()}),
        "balance_cents": serializers.IntegerField(),
        "balance": serializers.CharField(),
    },
)


@extend_schema(responses=MeSerializer)
@api_view(["GET"])
def me(request):
    """The key's user and project, and the project's balance."""
    project = request_project(request)
    cents = Account.balance_for(project)
    return Response(
        {
            "user": {"id": request.user.pk, "username": request.user.username, "email": request.user.email},
            "project": {"id": project.pk, "name": project.name},
            "balance_cents": cents,
            "balance": plain_dollars(cents),
        }
    )
