from django.db import migrations, models

# A host's engine address is its backend's to read, not Docker's alone (the fake's is a name).


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0008_sandboxhost_backend"),
    ]

    operations = [
        migrations.RenameField(model_name="sandboxhost", old_name="docker_url", new_name="url"),
        migrations.AlterField(
            model_name="sandboxhost",
            name="url",
            field=models.CharField(
                "URL", max_length=255, help_text="The engine's address, as its backend reads it: for Docker, unix:///var/run/docker.sock or tcp://host:2376."
            ),
        ),
    ]
