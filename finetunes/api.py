from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from belvedir.core.jsonvalues import JsonBodyParser
from belvedir.core.permissions import request_project
from harnesses.api import RunSerializer, start_run_response

from .actions import benchmark_env, benchmark_harnesses, delete_model, harness_kind, upload_model
from .forms import ModelUploadForm
from .models import FineTunedModel


class ModelSerializer(serializers.ModelSerializer):
    class Meta:
        model = FineTunedModel
        fields = ["id", "name", "base_model", "adapter_size", "adapter_format", "description", "created_at"]
        read_only_fields = ["adapter_format"]


class ModelRunSerializer(serializers.Serializer):
    harness = serializers.IntegerField()


class BenchmarkSerializer(serializers.Serializer):
    run = serializers.IntegerField(source="pk")
    harness = serializers.CharField(source="harness.name")
    harness_id = serializers.IntegerField()
    score = serializers.FloatField()
    base_score = serializers.FloatField(
        allow_null=True, help_text="The base model's score in the same run, when the harness reports it (results.json's base_score)."
    )
    date = serializers.DateTimeField(source="created_at")


class ModelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = ModelSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = FineTunedModel.objects.none()
    pagination_class = None
    parser_classes = [JsonBodyParser, MultiPartParser]

    def get_queryset(self):
        return FineTunedModel.objects.for_user(self.request.user, request_project(self.request))

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "base_model": {"type": "string", "description": "Hugging Face id"},
                    "adapter": {"type": "string", "format": "binary", "description": "The LoRA adapter as a zip"},
                    "description": {"type": "string"},
                },
                "required": ["name", "base_model", "adapter"],
            }
        },
        responses={201: ModelSerializer},
    )
    def create(self, request):
        """Upload a fine-tuned model: the Models page's form, with its validation and size limit."""
        project = request_project(request)
        form = ModelUploadForm(request.data, request.FILES, project=project)
        if not form.is_valid():
            raise ValidationError(form.errors)
        return Response(ModelSerializer(upload_model(form, project, request.user)).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, pk=None):
        delete_model(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=ModelRunSerializer, responses={201: RunSerializer})
    @action(detail=True, methods=["post"])
    def runs(self, request, pk=None):
        """Benchmark the model on one of the project's harnesses that runs its adapter (GPU for PEFT, CPU with the local model for GGUF), at that harness's price."""
        model = self.get_object()
        payload = ModelRunSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        harness = benchmark_harnesses(model).filter(pk=payload.validated_data["harness"]).first()
        if harness is None:
            return Response({"harness": [f"Choose a {harness_kind(model)} of this project."]}, status=400)
        return start_run_response(harness, request.user, env_for=benchmark_env(model))

    @extend_schema(responses=BenchmarkSerializer(many=True))
    @action(detail=True, methods=["get"])
    def benchmarks(self, request, pk=None):
        """Every scored run of the project whose results name this model."""
        return Response(BenchmarkSerializer(self.get_object().benchmark_runs(), many=True).data)
