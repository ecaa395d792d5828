from django.urls import path

from . import views

app_name = "agent_tasks"
urlpatterns = [
    path("tasks/", views.task_sets, name="list"),
    path("tasks/<int:pk>/", views.task_set_detail, name="detail"),
]
