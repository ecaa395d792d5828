from django.urls import path

from . import views

app_name = "review"
urlpatterns = [
    path("review/", views.queue_list, name="queues"),
    path("review/add/", views.add_to_queue, name="add"),
    path("review/<int:pk>/", views.queue_detail, name="queue"),
    path("review/<int:pk>/label/", views.review, name="review"),
    path("review/<int:pk>/<str:what>/", views.queue_action, name="action"),
]
