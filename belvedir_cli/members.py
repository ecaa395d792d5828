"""`bv members`: who works in the project; owners invite and remove."""

import click

from .client import ApiError
from .terminal import client, json_option, output


@click.group()
def members():
    """The project's members and invitations."""


@members.command("list")
@json_option
def members_list():
    output(client().get("members"), ["id", "username", "email", "role", "created_at"])


@members.command("invite")
@click.argument("user")
@json_option
def members_invite(user):
    """Invite an existing user by username or email; prints the single-use link to send them."""
    body = client().post("invitations", {"user": user})
    output(
        body
        if click.get_current_context().obj["json"]
        else {
            "invited": body["username"] or body["email"],
            "link": body["url"] or "none yet: mailed once someone verifies the address",
            "expires": body["expires_at"],
        }
    )


@members.command("remove")
@click.argument("username")
@json_option
def members_remove(username):
    """Remove a member (owners); their API keys for the project stop working."""
    found = [m for m in client().get("members") if m["username"] == username]
    if not found:
        raise ApiError(f"{username!r} is not a member of this project (see `bv members list`).")
    client().delete(f"members/{found[0]['id']}")
    output({"removed": username})
