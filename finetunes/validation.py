import zipfile

from django.conf import settings
from django.core.exceptions import ValidationError


def validate_adapter_zip(upload):
    """A real zip, within the size limit, whose members all unpack inside their folder."""
    limit = settings.MODEL_ADAPTER_MAX_BYTES
    if upload.size > limit:
        raise ValidationError(f"The adapter is {upload.size / 1e6:.1f} MB; the limit is {limit / 1e6:.0f} MB.")
    upload.seek(0)
    if not zipfile.is_zipfile(upload):
        raise ValidationError("The adapter must be a zip file.")
    upload.seek(0)
    try:
        with zipfile.ZipFile(upload) as archive:
            names = archive.namelist()
            if not names:
                raise ValidationError("The zip is empty.")
            for name in names:
                parts = name.replace("\\", "/").split("/")
                if name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":"):
                    raise ValidationError(f"Unsafe member name in the zip: {name!r}.")
            if sum(info.file_size for info in archive.infolist()) > 20 * limit:
                raise ValidationError("The zip unpacks to far more than its size allows (a zip bomb?).")
    except zipfile.BadZipFile as exc:
        raise ValidationError(f"The zip is damaged: {exc}.") from None
    finally:
        upload.seek(0)
