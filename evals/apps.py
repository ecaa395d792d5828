from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evaluations"

    def ready(self):
        from belvedir.sandbox import owners

        from .models import Eval
        from .tasks import resume_stale_evals

        owners.register("eval", active=lambda: Eval.objects.filter(status__in=Eval.ACTIVE), reap_stale=resume_stale_evals)
