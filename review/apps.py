from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Human review"

    def ready(self):
        # The judges' calibration cards (evals) count the queues' labels: registered here, so evals imports nothing of review.
        from evals.scoring import calibration

        from . import judged

        calibration.LABEL_SOURCES.append(judged.queue_labels)
        calibration.COUNT_SOURCES.append(judged.queue_label_count)
