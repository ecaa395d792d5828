from django.urls import path

from . import views

app_name = "models"
urlpatterns = [
    path("models/", views.model_list, name="list"),
    path("models/<int:pk>/", views.model_detail, name="detail"),
    path("models/<int:pk>/runs/", views.model_run, name="run"),
    path("models/<int:pk>/adapter/<int:run_id>/<str:token>/", views.adapter_download, name="adapter_download"),
]
