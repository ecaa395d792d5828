from django.urls import path

from . import git_views, views

app_name = "harnesses"
urlpatterns = [
    path("harnesses/", views.harness_list, name="list"),
    path("harnesses/new/", views.harness_new, name="new"),
    path("harnesses/<int:pk>/", views.harness_detail, name="detail"),
    path("harnesses/<int:pk>/edit/", views.harness_edit, name="edit"),
    path("harnesses/<int:pk>/delete/", views.harness_delete, name="delete"),
    path("harnesses/<int:pk>/runs/", views.run_start, name="run_start"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run_cancel"),
    path("drivers/<slug:name>.git/<path:rest>", git_views.driver_repo, name="driver_repo"),
]
