from django.urls import path

from . import views

app_name = "billing"
urlpatterns = [
    path("settings/balance/", views.balance, name="balance"),
    path("settings/balance/redeem/", views.redeem, name="redeem"),
    path("settings/balance/topup/", views.topup, name="topup"),
    path("settings/balance/topups/<int:pk>/", views.topup_status, name="topup_status"),
    path("billing/stripe/webhook", views.stripe_webhook, name="stripe_webhook"),
]
