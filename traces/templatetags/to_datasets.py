"""The session list's "add these sessions to a dataset" form, as a tag: the list's view stays as it is."""

from django import template

from ..dataset_forms import ToDatasetForm

register = template.Library()


@register.inclusion_tag("traces/_to_dataset_bulk.html", takes_context=True)
def add_sessions_to_dataset(context, sessions):
    request = context["request"]
    return {"sessions": sessions, "form": ToDatasetForm(request=request), "next": request.get_full_path(), "csrf_token": context.get("csrf_token")}
