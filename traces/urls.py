from django.urls import path

from . import dataset_views, evaluator_views, views

app_name = "traces"
urlpatterns = [
    path("traces/", views.sessions, name="sessions"),
    path("traces/groups/", views.groups, name="groups"),
    path("traces/groups/<int:pk>/training-data.jsonl", views.group_training_data, name="training_data"),
    path("traces/groups/<int:pk>/overlaps/", views.group_overlaps, name="training_overlaps"),
    path("traces/diff/", views.session_diff, name="diff"),
    path("traces/evaluators/", evaluator_views.evaluators, name="evaluators"),
    path("traces/evaluators/<int:pk>/", evaluator_views.evaluator_detail, name="evaluator"),
    path("traces/evaluators/<int:pk>/backfill/", evaluator_views.evaluator_backfill, name="evaluator_backfill"),
    path("traces/evaluators/<int:pk>/label/", evaluator_views.evaluator_label, name="evaluator_label"),
    path("traces/to-dataset/", dataset_views.sessions_to_dataset, name="sessions_to_dataset"),
    # Before the session itself: its id is a path, and would swallow "/to-dataset/".
    path("traces/sessions/<path:session_id>/to-dataset/", dataset_views.session_to_dataset, name="session_to_dataset"),
    path("traces/sessions/<path:session_id>/", views.session_detail, name="session"),
]
