"""Members, invitations and secrets over the API: what Settings → Members and Secrets do."""

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from . import actions
from .email_views import send_invitation
from .forms import SecretForm
from .models import Invitation, Membership, ProjectSecret
from .permissions import HasFullScope, IsProjectOwner, is_owner, request_project


class MembershipSerializer(serializers.ModelSerializer):
    user_id = serializers.IntegerField(read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.CharField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user_id", "username", "email", "role", "created_at"]
        read_only_fields = ["id", "created_at"]


class RoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(
        choices=Membership.Role.choices,
        help_text="owner hands the project over (you stay on as a member); member or reviewer (reads and labels review queues only) changes a member's role.",
    )


class MemberViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The project's members. Everyone lists them; owners remove and hand over; anyone removes themselves (leaves)."""

    serializer_class = MembershipSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Membership.objects.none()
    pagination_class = None

    def get_queryset(self):
        project = request_project(self.request)
        return Membership.objects.filter(project=project, project__memberships__user=self.request.user).select_related("user").order_by("pk")

    @extend_schema(request=RoleSerializer, responses=MembershipSerializer)
    def partial_update(self, request, pk=None):
        membership = self.get_object()
        project = request_project(request)
        if not is_owner(request.user, project):
            raise PermissionDenied("Only an owner of the project may do this.")
        payload = RoleSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        if payload.validated_data["role"] == Membership.Role.OWNER:
            actions.transfer_ownership(project, request.user, membership.user)
        else:
            actions.set_role(project, request.user, membership.user, payload.validated_data["role"])
        membership.refresh_from_db()
        return Response(MembershipSerializer(membership).data)

    def destroy(self, request, pk=None):
        """Remove a member (owners), or leave (your own membership); their keys for the project are revoked."""
        membership = self.get_object()
        project = request_project(request)
        if membership.user_id != request.user.pk and not is_owner(request.user, project):
            raise PermissionDenied("Only an owner of the project may do this.")
        actions.remove_member(project, membership.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True, default=None, help_text="Null while it waits for its address to be verified.")
    email = serializers.CharField(read_only=True, help_text="The address invited; empty when invited by username.")
    invited_by = serializers.CharField(source="invited_by.username", read_only=True, default=None)
    waits_for_verification = serializers.BooleanField(read_only=True)

    class Meta:
        model = Invitation
        fields = ["id", "username", "email", "invited_by", "state", "waits_for_verification", "created_at", "expires_at"]


class InviteSerializer(serializers.Serializer):
    user = serializers.CharField(max_length=254, help_text="Username of an existing user, or an email address (verified, or the invitation waits).")


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200, help_text="The token at the end of the invitation link.")


class InvitationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Owners invite, list and revoke; the invited user accepts or declines with the link's token."""

    serializer_class = InvitationSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Invitation.objects.none()
    pagination_class = None

    def get_permissions(self):
        # No action: a method the route does not take, answered 405 for everyone.
        return [HasFullScope()] if self.action in {"accept", "decline", None} else [IsProjectOwner()]

    def get_queryset(self):
        return Invitation.objects.for_user(self.request.user, request_project(self.request)).select_related("user", "invited_by")

    @extend_schema(request=InviteSerializer, responses={201: InvitationSerializer})
    def create(self, request):
        """Invite a user; the answer holds the link (`url`) once: only its hash is kept.

        An address nobody has verified gets an invitation that waits (`url` and `token` null):
        it is mailed to whoever verifies that address, and goes to them.
        """
        payload = InviteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        invitation, raw = actions.invite_member(request_project(request), request.user, payload.validated_data["user"])
        if raw is None:
            return Response({**InvitationSerializer(invitation).data, "url": None, "token": None}, status=status.HTTP_201_CREATED)
        send_invitation(request, invitation, raw)
        url = request.build_absolute_uri(reverse("invitation", args=[raw]))
        return Response({**InvitationSerializer(invitation).data, "url": url, "token": raw}, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Revoke a pending invitation."""
        actions.revoke_invitation(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=TokenSerializer, responses=MembershipSerializer)
    @action(detail=False, methods=["post"])
    def accept(self, request):
        invitation = self._invitation(request)
        membership = actions.accept_invitation(invitation)
        return Response({**MembershipSerializer(membership).data, "project": {"id": invitation.project_id, "name": invitation.project.name}})

    @extend_schema(request=TokenSerializer, responses={204: None})
    @action(detail=False, methods=["post"])
    def decline(self, request):
        actions.decline_invitation(self._invitation(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _invitation(self, request):
        payload = TokenSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return actions.invitation_for(payload.validated_data["token"], request.user)


class SecretSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProjectSecret
        fields = ["id", "name", "updated_at"]


class SecretWriteSerializer(serializers.Serializer):
    # The dashboard form's rules (forms.SecretForm), stated here so that the schema says them too.
    name = serializers.RegexField(
        SecretForm.base_fields["name"].regex.pattern,
        max_length=100,
        help_text="An env name, e.g. HF_TOKEN.",
        error_messages={"invalid": SecretForm.base_fields["name"].error_messages["invalid"]},
    )
    value = serializers.CharField(write_only=True, help_text="Stored for runs; never shown again.")


class SecretViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Project secrets (owners only); values are write-only, never returned."""

    serializer_class = SecretSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = ProjectSecret.objects.none()
    permission_classes = [IsProjectOwner]
    pagination_class = None

    def get_queryset(self):
        return ProjectSecret.objects.for_user(self.request.user, request_project(self.request))

    @extend_schema(request=SecretWriteSerializer, responses={201: SecretSerializer})
    def create(self, request):
        """Create or replace a secret by name (the dashboard's form and rules)."""
        payload = SecretWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        secret = actions.save_secret(request_project(request), payload.validated_data["name"], payload.validated_data["value"])
        return Response(SecretSerializer(secret).data, status=status.HTTP_201_CREATED)
