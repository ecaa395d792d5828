from django import forms


class TaskSetUploadForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="The task set's name; uploading under an existing name adds a version when the content changed.")
    file = forms.FileField(
        help_text="A .tar.gz or .zip of a task directory (task.toml, instruction.md, environment/, tests/, solution/) or of a folder of them."
    )
