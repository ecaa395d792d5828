from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"

    def ready(self):
        from evals.scoring import calibration

        from . import checks  # noqa: F401  (registers the system checks)
        from .evaluator_rules import judge_keys, label_count, label_pairs

        # A judge evaluator's verdicts, labelled by people, count on its calibration card like an eval judge's.
        calibration.LABEL_SOURCES.append(label_pairs)
        calibration.KEY_SOURCES.append(judge_keys)
        calibration.COUNT_SOURCES.append(label_count)
