from django.urls import path

from . import views
from .datasets import views as dataset_views
from .suites import views as suite_views

app_name = "evals"
urlpatterns = [
    path("evals/", views.eval_list, name="list"),
    path("evals/benchmarks/", views.benchmark_catalog, name="benchmarks"),
    path("evals/new/benchmark/", views.create_benchmark_eval, name="create_benchmark"),
    path("evals/new/dataset/", views.create_dataset_eval, name="create_dataset"),
    path("evals/<int:pk>/", views.eval_detail, name="detail"),
    path("evals/<int:pk>/samples.<str:fmt>", views.eval_download, name="download"),
    path("evals/<int:pk>/cancel/", views.eval_cancel, name="cancel"),
    path("evals/<int:pk>/resume/", views.eval_resume, name="resume"),
    path("evals/<int:pk>/rerun/", views.eval_rerun, name="rerun"),
    path("evals/<int:pk>/compare/<int:other>/", views.eval_paired, name="paired"),
    path("evals/compare/<str:benchmark>/", views.compare, name="compare"),
    path("evals/deployments/", views.deployments, name="deployments"),
    path("evals/deployments/<int:pk>/test/", views.deployment_test, name="deployment_test"),
    path("evals/deployments/<int:pk>/clear-cache/", views.deployment_clear_cache, name="deployment_clear_cache"),
    path("evals/datasets/", dataset_views.datasets, name="datasets"),
    path("evals/datasets/<int:pk>/", dataset_views.dataset_detail, name="dataset"),
    path("evals/datasets/<int:pk>/rows/", dataset_views.dataset_add_row, name="dataset_add_row"),
    path("evals/datasets/<int:pk>/rows/<int:position>/edit/", dataset_views.dataset_edit_row, name="dataset_edit_row"),
    path("evals/datasets/<int:pk>/rows/<int:position>/remove/", dataset_views.dataset_remove_row, name="dataset_remove_row"),
    path("evals/datasets/<int:pk>/upload/", dataset_views.dataset_upload, name="dataset_upload"),
    path("evals/<int:pk>/retry-errors/", views.eval_retry_errors, name="retry_errors"),
    path("evals/<int:pk>/rescore/", views.eval_rescore, name="rescore"),
    path("evals/<int:pk>/label/", views.eval_label, name="label"),
    path("evals/suites/", suite_views.suites, name="suites"),
    path("evals/local-model/quick-suite/", suite_views.local_model_quick_suite, name="local_model_quick_suite"),
    path("evals/suite-runs/<int:pk>/", suite_views.suite_run, name="suite_run"),
    path("evals/suite-runs/<int:pk>/compare/", suite_views.suite_compare_pick, name="suite_compare_pick"),
    path("evals/suite-runs/<int:pk>/compare/<int:other>/", suite_views.suite_compare, name="suite_compare"),
    path("evals/suite-runs/<int:pk>/<str:what>/", suite_views.suite_run_action, name="suite_run_action"),
    path("evals/judges/", suite_views.judges, name="judges"),
]
