from django.apps import AppConfig


class FinetunesConfig(AppConfig):
    name = "finetunes"
    verbose_name = "Fine-tuned models"
