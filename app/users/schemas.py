"""API schemas of users."""

from datetime import datetime

from pydantic import BaseModel, Field


class UserPublic(BaseModel):
    """A user as the caller sees them: agent keys count only their own agent's sessions."""

    id: str = Field(description="The opaque user id sessions were created with.")
    session_count: int
    message_count: int = Field(description="Messages in those sessions.")
    first_seen: datetime | None = Field(description="Creation of the oldest session.")
    last_activity: datetime | None = Field(
        description="The latest change (an append, a config change) in any of those sessions."
    )
    fact_count: int | None = Field(
        default=None,
        description=(
            "Items in the `user/<id>` knowledge tier (valid or not); only on GET of one user."
        ),
    )


class UserList(BaseModel):
    items: list[UserPublic]
    next_cursor: str | None
