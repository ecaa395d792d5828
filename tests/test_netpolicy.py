"""The one egress policy: decided on resolved addresses, for every user-driven connection."""

import ipaddress

import pytest

from belvedir.core.netpolicy import Origin, Policy, Refused, egress_policy


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.8.9.10",
        "localhost",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.254",
        "224.0.0.1",
        "239.1.2.3",
        "0.0.0.0",
        "255.255.255.255",
        "240.0.0.1",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "ff02::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
    ],
)
def test_it_refuses_every_private_and_special_address(host):
    with pytest.raises(Refused, match="private or special-purpose"):
        Policy().resolve(host, 443)


@pytest.mark.parametrize("host", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_it_allows_public_addresses_on_the_egress_ports(host):
    assert Policy().resolve(host, 443) == [host]
    with pytest.raises(Refused, match="Port 22"):
        Policy().resolve(host, 22)


def test_the_platform_origin_is_allowed_even_on_a_private_address_but_only_its_port():
    policy = Policy(origins=(Origin("127.0.0.1", 8000),))
    assert policy.resolve("127.0.0.1", 8000) == ["127.0.0.1"]
    with pytest.raises(Refused):
        policy.resolve("127.0.0.1", 5432)
    with pytest.raises(Refused):
        policy.resolve("localhost", 8000)  # another name for it is not the origin


def test_operator_networks_are_allowed_and_nothing_else_of_loopback():
    policy = Policy(networks=(ipaddress.ip_network("127.0.0.2/32"),))
    assert policy.resolve("127.0.0.2", 9999) == ["127.0.0.2"]
    with pytest.raises(Refused):
        policy.resolve("127.0.0.3", 9999)


def test_a_domain_allowlist_narrows_egress_but_keeps_the_platform():
    policy = Policy(origins=(Origin("127.0.0.1", 8000),), domains=("anthropic.com",))
    policy.check_name("api.anthropic.com", 443)
    policy.check_name("127.0.0.1", 8000)
    for host in ("evil-anthropic.com", "anthropic.com.evil.io", "8.8.8.8"):
        with pytest.raises(Refused, match="allowlist"):
            policy.check_name(host, 443)


def test_a_name_that_does_not_resolve_is_refused_with_a_reason():
    with pytest.raises(Refused, match="does not resolve"):
        Policy().resolve("no-such-host.invalid", 443)


def test_the_harness_policy_allows_the_local_model_server_and_not_the_rest_of_its_host(settings):
    settings.BELVEDIR_BASE_URL = "http://10.1.2.3:8000"
    settings.LOCAL_MODEL_URL = "http://127.0.0.1:8001/v1"
    policy = egress_policy(["example.org"])  # a domain allowlist keeps it too, as it keeps the platform
    policy.check_name("127.0.0.1", 8001)
    assert policy.resolve("127.0.0.1", 8001) == ["127.0.0.1"]
    for port in (8000, 5432, 6379):
        with pytest.raises(Refused):
            policy.resolve("127.0.0.1", port)


def test_the_harness_policy_comes_from_settings(settings):
    settings.BELVEDIR_BASE_URL = "http://10.1.2.3:8000"
    settings.EGRESS_PORTS = [443]
    policy = egress_policy(["example.org"])
    assert policy.resolve("10.1.2.3", 8000) == ["10.1.2.3"]  # the platform, on a private address
    assert policy.domains == ("example.org",) and policy.ports == frozenset({443})
