import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def first_versions(apps, schema_editor):
    """Every dataset so far is its upload: version 1, and every eval of one scored that version."""
    Dataset = apps.get_model("evals", "Dataset")
    DatasetVersion = apps.get_model("evals", "DatasetVersion")
    Eval = apps.get_model("evals", "Eval")
    DatasetVersion.objects.bulk_create(
        [
            DatasetVersion(
                dataset=d, number=1, row_count=d.row_count, added=d.row_count, note="Uploaded", created_by_id=d.created_by_id, created_at=d.created_at
            )
            for d in Dataset.objects.all()
        ],
        batch_size=1000,
    )
    Eval.objects.filter(dataset__isnull=False).update(dataset_version=1)


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0012_suites_judges_epochs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="datasetrow", name="one_row_per_index"),
        migrations.RenameField(model_name="datasetrow", old_name="index", new_name="position"),
        migrations.AlterModelOptions(name="datasetrow", options={"ordering": ["position", "since_version"]}),
        migrations.AddField(model_name="dataset", name="version", field=models.PositiveIntegerField(default=1)),
        migrations.AddField(
            model_name="datasetrow",
            name="input_format",
            field=models.CharField(choices=[("text", "Text"), ("messages", "Messages")], default="text", max_length=8),
        ),
        migrations.AddField(model_name="datasetrow", name="metadata", field=models.JSONField(blank=True, default=dict)),
        migrations.AddField(model_name="datasetrow", name="since_version", field=models.PositiveIntegerField(default=1)),
        migrations.AddField(model_name="datasetrow", name="until_version", field=models.PositiveIntegerField(blank=True, null=True)),
        migrations.AlterField(model_name="datasetrow", name="expected", field=models.TextField(blank=True)),
        migrations.AddField(model_name="eval", name="dataset_version", field=models.PositiveIntegerField(blank=True, null=True)),
        migrations.CreateModel(
            name="DatasetVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("number", models.PositiveIntegerField()),
                ("row_count", models.PositiveIntegerField(default=0)),
                ("added", models.PositiveIntegerField(default=0)),
                ("edited", models.PositiveIntegerField(default=0)),
                ("removed", models.PositiveIntegerField(default=0)),
                ("note", models.CharField(blank=True, help_text="What made it: an upload, an edit, rows from traces.", max_length=200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "created_by",
                    models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL),
                ),
                ("dataset", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="versions", to="evals.dataset")),
            ],
            options={
                "ordering": ["-number"],
                "constraints": [models.UniqueConstraint(fields=("dataset", "number"), name="one_version_number_per_dataset")],
            },
        ),
        migrations.AddConstraint(
            model_name="datasetrow",
            constraint=models.UniqueConstraint(fields=("dataset", "position", "since_version"), name="one_row_per_position_and_version"),
        ),
        migrations.AddConstraint(
            model_name="datasetrow",
            constraint=models.UniqueConstraint(
                condition=models.Q(("until_version__isnull", True)), fields=("dataset", "position"), name="one_current_row_per_position"
            ),
        ),
        migrations.AddIndex(model_name="datasetrow", index=models.Index(fields=["dataset", "since_version"], name="dataset_row_started")),
        migrations.AddIndex(model_name="datasetrow", index=models.Index(fields=["dataset", "until_version"], name="dataset_row_ended")),
        migrations.RunPython(first_versions, migrations.RunPython.noop),
    ]
