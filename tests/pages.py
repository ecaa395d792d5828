def shown(response, status: int = 200) -> str:
    """The body of a page that really rendered: a test checking that a secret
    is absent must not pass on an error page or a redirect."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}"
    return response.content.decode()
