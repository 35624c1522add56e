"""The authorizer keys of server.properties: accepted, typed, and checked when read."""

import pytest

from broker.config.server_config import ConfigError

from .test_config_server import cfg

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def test_defaults_mean_no_authorizer() -> None:
    c, warnings = cfg()
    assert c.authorizer_class_name == "" and c.super_users is None
    assert c.allow_everyone_if_no_acl_found is False and warnings == []


def test_standard_authorizer_with_super_users() -> None:
    c, warnings = cfg(
        f"authorizer.class.name={STANDARD}\nsuper.users=User:admin; User:ops\n"
        "allow.everyone.if.no.acl.found=true\n"
    )
    assert c.authorizer_class_name == STANDARD and c.super_users == "User:admin; User:ops"
    assert c.allow_everyone_if_no_acl_found is True
    assert warnings == []  # implemented keys: no "accepted but ignored" warning


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n", "the only authorizer"),
        ("super.users=admin\n", "is not Type:name"),
        ("allow.everyone.if.no.acl.found=maybe\n", "allow.everyone.if.no.acl.found"),
    ],
)
def test_bad_values_name_the_key(extra: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        cfg(extra)
