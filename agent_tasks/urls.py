from django.urls import path

from . import job_views, regrade_views, views

app_name = "agent_tasks"
urlpatterns = [
    path("tasks/", views.task_sets, name="list"),
    path("tasks/<int:pk>/", views.task_set_detail, name="detail"),
    path("tasks/<int:pk>/versions/<int:number>/audit/", views.audit, name="audit"),
    path("jobs/", job_views.job_list, name="jobs"),
    path("jobs/<int:pk>/", job_views.job_detail, name="job"),
    path("jobs/<int:pk>/compare/", job_views.job_compare, name="job-compare"),
    path("jobs/<int:pk>/cancel/", job_views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/retry-errors/", job_views.job_retry_errors, name="job-retry-errors"),
    path("jobs/<int:pk>/export/", job_views.job_export, name="job-export"),
    path("jobs/<int:pk>/regrade/", regrade_views.regrade_start, name="job-regrade"),
    path("regrades/<int:pk>/", regrade_views.regrade_detail, name="regrade"),
    path("regrades/<int:pk>/cancel/", regrade_views.regrade_cancel, name="regrade-cancel"),
    path("trials/<int:pk>/", job_views.trial_detail, name="trial"),
    path("trials/<int:pk>/outputs.tar.gz", job_views.trial_outputs, name="trial-outputs"),
]
