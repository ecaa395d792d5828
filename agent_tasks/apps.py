from django.apps import AppConfig


class AgentTasksConfig(AppConfig):
    name = "agent_tasks"
    verbose_name = "Agent tasks"
