from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet
from harnesses.models import Run

from . import formats


def adapter_path(instance, filename):
    # Never the uploaded name: a random-ish, per-project path.
    return f"adapters/{instance.project_id}/{timezone.now():%Y%m%d%H%M%S%f}.zip"


class FineTunedModel(models.Model):
    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="finetuned_models")
    name = models.CharField(max_length=200, help_text='The label benchmark results report as "model".')
    base_model = models.CharField("Base model", max_length=200, help_text="Hugging Face id, e.g. meta-llama/Llama-3.1-8B-Instruct")
    adapter = models.FileField(upload_to=adapter_path, help_text="The LoRA adapter as a zip.")
    adapter_size = models.BigIntegerField(default=0)
    adapter_format = models.CharField(max_length=10, choices=formats.CHOICES, default=formats.PEFT, editable=False)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_model_name_per_project")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("models:detail", args=[self.pk])

    @property
    def runs_on(self) -> str:
        return "CPU, with the local model" if self.adapter_format == formats.GGUF else "GPU, with vLLM"

    def benchmark_runs(self):
        """Every run of the project whose results name this model, however it was started."""
        return Run.objects.filter(project=self.project, model_label=self.name, score__isnull=False).select_related("harness")
