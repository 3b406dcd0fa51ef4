"""The firewall role on a single node whose API Docker publishes (compose), and on an IPv6 cluster link: real
nftables, real forwarding, real packets, in network namespaces of this machine.

Three namespaces stand in for three machines: a client (two IPv4 addresses, one allowed and one not, and an IPv6
address that is a cluster peer), the serving host (the "router" here: it runs the role), and the container behind
Docker's published port (a plain HTTP server). **Stand-in, named as such:** Docker's port publishing is one nat rule
in the serving host's namespace, `tcp dport 18000 dnat to <container>:8000`, the translation Docker's DOCKER chain
makes for `-p 18000:8000`; Docker itself is not run there (its own FORWARD rules would apply after this role's, which
runs first and whose drop is final). The port clients ask for (18000) differs from the container's (8000) on
purpose: a rule on the translated port would miss, the role matches the port before the translation.

Asserted, each on traffic, each time with its control:
  * without the role's table both client addresses reach the published port (the path works and is forwarded);
  * with `firewall_api_allow` naming one address, that one still reaches it and the other no longer does, although
    its packets never reach the input hook (forwarded traffic, the compose case);
  * a second run changes nothing;
  * on the link interface (`firewall_link_interface`), a cluster peer's IPv6 address still answers once the link
    rule drops non-peers: the peers' neighbour discovery, from link-local addresses, is let through. A ruleset
    without that exception (rendered with the ND rule removed) is the control, and the peer is unreachable then.

Nothing here touches this machine's own firewall: the role runs under `ip netns exec`, with firewall_persist off and
its rules directory in a scratch folder; the namespaces are removed afterwards.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO, ansible_env, require, run, tool

PID = os.getpid()
CLIENT, HOST, CONTAINER = "sf-fw-client-%d" % PID, "sf-fw-host-%d" % PID, "sf-fw-ctr-%d" % PID
HOST_ON_CLIENT_SIDE, HOST_ON_CONTAINER_SIDE = "10.88.1.1", "10.88.2.1"
ALLOWED, REFUSED = "10.88.1.2", "10.88.1.3"
CONTAINER_ADDR = "10.88.2.2"
HOST6, PEER6 = "2001:db8:88::1", "2001:db8:88::2"
PUBLISHED, CONTAINER_PORT = 18000, 8000
PLAYBOOK = REPO / "tests/integration/playbooks/firewall_netns.yml"
# One HTTP GET from a chosen source address; prints the status, or the error's name.
PROBE = r"""
import socket, sys
s = socket.socket(); s.settimeout(3); s.bind((sys.argv[1], 0))
try:
    s.connect((sys.argv[2], int(sys.argv[3]))); s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print(s.recv(64).split(b"\r\n")[0].decode())
except OSError as error:
    print(type(error).__name__)
"""


def ns(name, *cmd, check=True, timeout=60, **kwargs):
    return run(["ip", "netns", "exec", name, *cmd], check=check, timeout=timeout, **kwargs)


def reaches(source):
    """Does an HTTP GET from `source` on the client reach the container through the published port?"""
    out = ns(CLIENT, sys.executable, "-c", PROBE, source, HOST_ON_CLIENT_SIDE, str(PUBLISHED)).stdout.strip()
    return out.startswith("HTTP/1.0 200"), out


# A router advertisement with one SLAAC prefix, sent from the client's link-local address with hop limit 255, as
# a router on the link would (the kernel fills in the ICMPv6 checksum of a raw socket).
ADVERTISE = r"""
import socket, struct, sys
prefix = socket.inet_pton(socket.AF_INET6, sys.argv[2])
ra = struct.pack("!BBHBBHII", 134, 0, 0, 64, 0, 0, 0, 0)
ra += struct.pack("!BBBBIII", 3, 4, 64, 0xC0, 3600, 1800, 0) + prefix
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, socket.if_nametoindex(sys.argv[1]))
s.sendto(ra, ("ff02::1", 0, 0, socket.if_nametoindex(sys.argv[1])))
"""
SLAAC_PREFIX = "2001:db8:99::"


def peer_answers():
    """Does the serving host's IPv6 address answer the peer, with the neighbour caches emptied first?"""
    for name in (CLIENT, HOST):
        ns(name, "ip", "-6", "neigh", "flush", "all", check=False)
    return ns(CLIENT, "ping", "-6", "-c", "2", "-W", "2", "-I", PEER6, HOST6, check=False).returncode == 0


def takes_the_advertised_prefix():
    """Does the serving host configure an address from a router advertisement on the link (neighbour discovery
    from a link-local source, the case the link rule's exception is for)? The address is removed afterwards."""
    def slaac():
        return [line for line in ns(HOST, "ip", "-6", "-o", "addr", "show", "dev", "fwh0").stdout.splitlines()
                if SLAAC_PREFIX[:-1] in line]
    for line in slaac():
        ns(HOST, "ip", "-6", "addr", "del", line.split()[3], "dev", "fwh0")
    ns(CLIENT, sys.executable, "-c", ADVERTISE, "fwc0", SLAAC_PREFIX)
    for _attempt in range(20):
        found = slaac()
        if found:
            break
        time.sleep(0.25)
    for line in found:
        ns(HOST, "ip", "-6", "addr", "del", line.split()[3], "dev", "fwh0")
    return bool(found)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    require(shutil.which("ip") and os.geteuid() == 0, "iproute2 and root, for network namespaces")
    if not (shutil.which("nft") and shutil.which("ping")):
        run(["apt-get", "install", "-y", "-q", "nftables", "iputils-ping"], timeout=600)
    require(shutil.which("nft") and shutil.which("ping"), "nft (apt-get install nftables) and ping")
    work = tmp_path_factory.mktemp("firewall")
    try:
        for name in (CLIENT, HOST, CONTAINER):
            run(["ip", "netns", "add", name])
            ns(name, "ip", "link", "set", "lo", "up")
        run(["ip", "link", "add", "fwc0", "netns", CLIENT, "type", "veth", "peer", "name", "fwh0", "netns", HOST])
        run(["ip", "link", "add", "fwh1", "netns", HOST, "type", "veth", "peer", "name", "fwk0", "netns", CONTAINER])
        for name, dev, addrs in ((CLIENT, "fwc0", [ALLOWED + "/24", REFUSED + "/24"]),
                                 (HOST, "fwh0", [HOST_ON_CLIENT_SIDE + "/24"]),
                                 (HOST, "fwh1", [HOST_ON_CONTAINER_SIDE + "/24"]),
                                 (CONTAINER, "fwk0", [CONTAINER_ADDR + "/24"])):
            for addr in addrs:
                ns(name, "ip", "addr", "add", addr, "dev", dev)
            ns(name, "ip", "link", "set", dev, "up")
        ns(CLIENT, "ip", "-6", "addr", "add", PEER6 + "/64", "dev", "fwc0", "nodad")
        ns(HOST, "ip", "-6", "addr", "add", HOST6 + "/64", "dev", "fwh0", "nodad")
        # The serving host takes addresses from router advertisements on the link, as a host on a SLAAC link does.
        ns(HOST, "sysctl", "-q", "-w", "net.ipv6.conf.fwh0.accept_ra=2", "net.ipv6.conf.fwh0.autoconf=1")
        ns(CONTAINER, "ip", "route", "add", "default", "via", HOST_ON_CONTAINER_SIDE)
        ns(HOST, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        (work / "docker-standin.nft").write_text(
            "table ip standin_docker {\n chain prerouting {\n  type nat hook prerouting priority dstnat;\n"
            "  tcp dport %d dnat to %s:%d\n }\n}\n" % (PUBLISHED, CONTAINER_ADDR, CONTAINER_PORT))
        ns(HOST, "nft", "-f", str(work / "docker-standin.nft"))
        server = subprocess.Popen(["ip", "netns", "exec", CONTAINER, sys.executable, "-m", "http.server",
                                   str(CONTAINER_PORT), "--bind", CONTAINER_ADDR], cwd=work,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            yield work
        finally:
            server.kill()
            server.wait(10)
    finally:
        for name in (CLIENT, HOST, CONTAINER):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def apply_role(work, extra):
    rules = work / "rules"
    variables = {"firewall_install": False, "firewall_persist": False, "firewall_rules_dir": str(rules),
                 "firewall_api_port": PUBLISHED, "firewall_cluster_group": "", "ansible_python_interpreter": sys.executable}
    variables.update(extra)
    return ns(HOST, tool("ansible-playbook"), "-i", "localhost,", str(PLAYBOOK), "-e", json.dumps(variables),
              timeout=300, env=ansible_env())


def test_published_port_is_filtered_by_the_allow_list(hosts):
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    deadline = time.monotonic() + 30
    while not reaches(ALLOWED)[0] and time.monotonic() < deadline:
        time.sleep(0.5)
    before = {source: reaches(source) for source in (ALLOWED, REFUSED)}
    assert all(ok for ok, _answer in before.values()), "control: without the role both reach the published port: %s" % before

    first = apply_role(hosts, {"firewall_api_allow": [ALLOWED + "/32"]})
    second = apply_role(hosts, {"firewall_api_allow": [ALLOWED + "/32"]})
    after = {source: reaches(source) for source in (ALLOWED, REFUSED)}
    listed = ns(HOST, "nft", "list", "table", "inet", "sparkfleet").stdout
    assert after[ALLOWED][0], "the allowed address lost the published port: %s\n%s" % (after, listed)
    assert not after[REFUSED][0], "a refused address still reaches the published port: %s\n%s" % (after, listed)
    assert "changed=0" in second.stdout and "changed=0" not in first.stdout, second.stdout[-2000:]
    # The drop that refused it is the forward hook's (the packets were forwarded, not delivered to this host).
    forward = listed[listed.index("chain forward"):]
    assert "counter packets 0 " not in forward.split("ct original proto-dst %d counter" % PUBLISHED)[1], forward


def test_link_rule_keeps_ipv6_neighbour_discovery(hosts):
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    assert takes_the_advertised_prefix(), "control: without any firewall the host ignores the link's advertisement"
    apply_role(hosts, {"firewall_api_allow": "all", "firewall_link_interface": "fwh0",
                       "firewall_cluster_extra_peers": [ALLOWED, PEER6]})
    listed = ns(HOST, "nft", "list", "table", "inet", "sparkfleet").stdout
    assert 'iifname "fwh0" ip6 saddr != @cluster_peers_v6' in listed, listed
    assert peer_answers(), "the IPv6 peer no longer answers through the link rule:\n" + listed
    assert takes_the_advertised_prefix(), "neighbour discovery from a link-local source is dropped:\n" + listed

    # The control: the same ruleset without the neighbour-discovery exception drops the advertisement.
    rules = pathlib.Path(hosts / "rules" / "sparkfleet.nft")
    without = "\n".join(line for line in rules.read_text().splitlines() if "nd-neighbor-solicit" not in line)
    control = hosts / "without-nd.nft"
    control.write_text(without + "\n")
    ns(HOST, "nft", "-f", str(control))
    dropped = not takes_the_advertised_prefix()
    ns(HOST, "nft", "-f", str(rules))
    assert dropped, "control: without the ND rule the advertisement still got through, so this test proves nothing"
    assert takes_the_advertised_prefix(), "the advertisement gets through again once the role's ruleset is back"
