from urllib.parse import urlparse

from django.core.exceptions import ValidationError

from belvedir.core.netpolicy import Origin, Refused, outbound_policy


def validate_deployment_url(url: str):
    """https/http only, to an address the outbound policy allows (checked
    again on every connection: see evals/outbound.py)."""
    parsed = urlparse(url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise ValidationError("Enter the endpoint's base URL, e.g. https://api.example.com/v1.")
    origin = Origin.from_url(url)
    try:
        outbound_policy().resolve(origin.host, origin.port)
    except Refused as exc:
        raise ValidationError(f"{exc} This server does not call private or local addresses.") from None


def deployment_problem(benchmark, deployment) -> str:
    """Why the deployment cannot run the benchmark, or "": tools go only with the chat API (a completions request has no `tools`)."""
    if benchmark.calls_tools and deployment.api_style != deployment.Style.CHAT:
        return (
            f"{benchmark.name} calls tools, which needs a chat deployment: {deployment.name} uses the completions API, "
            "which has no tools. Choose a chat deployment, or set this one's API style to chat if its endpoint serves /chat/completions."
        )
    return ""
