from django.urls import path

from . import views

app_name = "traces"
urlpatterns = [
    path("traces/", views.sessions, name="sessions"),
    path("traces/groups/", views.groups, name="groups"),
    path("traces/groups/<int:pk>/training-data.jsonl", views.group_training_data, name="training_data"),
    path("traces/diff/", views.session_diff, name="diff"),
    path("traces/sessions/<path:session_id>/", views.session_detail, name="session"),
]
