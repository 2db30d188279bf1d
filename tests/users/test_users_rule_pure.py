"""The users rule (issue 28), pure: which keys see every user."""

from app.users.access import sees_every_user


def test_only_agent_keys_are_limited_to_the_users_their_agent_knows() -> None:
    assert sees_every_user("service") and sees_every_user("admin")
    assert not sees_every_user("agent")
