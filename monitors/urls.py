from django.urls import path

from . import views

app_name = "monitors"
urlpatterns = [
    path("monitors/", views.monitor_list, name="list"),
    path("monitors/<int:pk>/", views.monitor_detail, name="detail"),
    path("monitors/<int:pk>/<str:what>/", views.monitor_action, name="action"),
    path("alerts/<int:pk>/<str:what>/", views.alert_action, name="alert_action"),
]
