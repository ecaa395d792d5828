from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from agent_tasks import api as agent_tasks_api
from agent_tasks import job_api
from belvedir.core import docs_views, email_views, team_api, team_views
from belvedir.core import views as core_views
from billing import api as billing_api
from evals import api as evals_api
from evals.datasets import api as dataset_api
from evals.suites import api as suite_api
from finetunes import api as finetunes_api
from harnesses import api as harnesses_api
from monitors import api as monitors_api
from review import api as review_api
from traces import api as traces_api
from traces import dataset_api as traces_dataset_api
from traces import evaluator_api
from workspace import api as workspace_api
from workspace import views as workspace_views
from workspace.mcp import view as mcp_view

router = SimpleRouter(trailing_slash=False)
router.register("harnesses", harnesses_api.HarnessViewSet, basename="harness")
router.register("runs", harnesses_api.RunViewSet, basename="run")
router.register("presets", harnesses_api.PresetViewSet, basename="preset")
router.register("deployments", evals_api.DeploymentViewSet, basename="deployment")
router.register("evals", evals_api.EvalViewSet, basename="eval")
router.register("datasets", dataset_api.DatasetViewSet, basename="dataset")
router.register("suites", suite_api.SuiteViewSet, basename="suite")
router.register("suite-runs", suite_api.SuiteRunViewSet, basename="suite-run")
router.register("evaluators", evaluator_api.EvaluatorViewSet, basename="evaluator")
router.register("models", finetunes_api.ModelViewSet, basename="model")
router.register("task-sets", agent_tasks_api.TaskSetViewSet, basename="task-set")
router.register("jobs", job_api.JobViewSet, basename="job")
router.register("trials", job_api.TrialViewSet, basename="trial")
router.register("regrades", job_api.RegradeViewSet, basename="regrade")
router.register("members", team_api.MemberViewSet, basename="member")
router.register("invitations", team_api.InvitationViewSet, basename="invitation")
router.register("secrets", team_api.SecretViewSet, basename="secret")
router.register("monitors", monitors_api.MonitorViewSet, basename="monitor")
router.register("alerts", monitors_api.AlertViewSet, basename="alert")
router.register("review-queues", review_api.QueueViewSet, basename="review-queue")

api_v1 = [
    path("me", workspace_api.me, name="api-me"),
    path("balance", billing_api.balance, name="api-balance"),
    path("coupons/redeem", billing_api.redeem, name="api-coupon-redeem"),
    path("traces", traces_api.TraceIngest.as_view(), name="api-traces"),
    path("outcomes", traces_api.outcomes, name="api-outcomes"),
    path("sessions", traces_api.SessionList.as_view(), name="api-sessions"),
    path("session-diff", traces_api.session_diff, name="api-session-diff"),
    # Before the session itself: its id is a path, and would swallow "/steps".
    path("sessions/<path:session_id>/steps", traces_api.session_steps, name="api-session-steps"),
    path("sessions/<path:session_id>", traces_api.session_detail, name="api-session"),
    path("task-groups", traces_api.task_groups, name="api-task-groups"),
    path("task-groups/<int:pk>/training-data", traces_api.training_data, name="api-training-data"),
    # Before the router's datasets/<pk>: "rows-from-traces" is no dataset's id.
    path("datasets/rows-from-traces", traces_dataset_api.rows_from_traces, name="api-rows-from-traces"),
    path("benchmarks", evals_api.benchmark_list, name="api-benchmarks"),
    path("scorers", evals_api.scorer_list, name="api-scorers"),
    path("judges", suite_api.judges, name="api-judges"),
    *router.urls,
]

urlpatterns = [
    path("", workspace_views.home, name="home"),
    path("signup/", core_views.signup, name="signup"),
    path("login/", core_views.ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("verify-email/<str:token>/", email_views.verify_email, name="verify_email"),
    path("settings/email/", email_views.email_settings, name="email_settings"),
    path("password-reset/", email_views.PasswordResetView.as_view(), name="password_reset"),
    path("password-reset/sent/", auth_views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(), name="password_reset_confirm"),
    path("reset/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("settings/", core_views.settings_index, name="settings"),
    path("settings/api-keys/", core_views.api_keys, name="api_keys"),
    path("settings/api-keys/<int:pk>/revoke/", core_views.revoke_api_key, name="revoke_api_key"),
    path("settings/secrets/", core_views.secrets, name="secrets"),
    path("settings/secrets/<int:pk>/delete/", core_views.delete_secret, name="delete_secret"),
    path("settings/members/", team_views.members, name="members"),
    path("settings/members/<int:pk>/remove/", team_views.remove_member, name="remove_member"),
    path("settings/members/<int:pk>/make-owner/", team_views.make_owner, name="make_owner"),
    path("settings/members/<int:pk>/role/", team_views.set_role, name="set_role"),
    path("settings/members/leave/", team_views.leave_project, name="leave_project"),
    path("settings/invitations/<int:pk>/revoke/", team_views.revoke_invitation, name="revoke_invitation"),
    path("settings/project/delete/", workspace_views.delete_project, name="delete_project"),
    path("invitations/<str:token>/", team_views.invitation, name="invitation"),
    path("projects/new/", team_views.new_project, name="new_project"),
    path("projects/switch/", team_views.switch_project, name="switch_project"),
    path("", include("billing.urls")),
    path("", include("harnesses.urls")),
    path("", include("traces.urls")),
    path("", include("evals.urls")),
    path("", include("finetunes.urls")),
    path("", include("agent_tasks.urls")),
    path("", include("monitors.urls")),
    path("", include("review.urls")),
    path("docs/", docs_views.docs, name="docs"),
    path("docs/<path:path>", docs_views.docs),
    path("admin/login/", core_views.admin_login),  # ahead of the admin's own: throttled
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("mcp", mcp_view.mcp_endpoint, name="mcp"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]

handler400 = "belvedir.core.error_views.bad_request"
handler403 = "belvedir.core.error_views.permission_denied"
handler404 = "belvedir.core.error_views.page_not_found"
handler500 = "belvedir.core.error_views.server_error"
