"""Offline stand-in for ansible-test's downloaded get-pip bootstrap script.

ansible-test fetches get-pip.py from a CI file host that this network cannot
reach. It looks in ~/.ansible/test/cache/get_pip_<version>.py first, so
tests/harness/sanity.sh places this file there. It bootstraps pip from the
interpreter's own ensurepip, points the new virtual environment's pip at the
system CA bundle (ansible-test strips PIP_CERT from the environment, and the
package mirror is reached through a TLS-intercepting proxy), then installs
exactly the packages ansible-test asked for.
"""
import os
import subprocess
import sys

CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    bundle = next((path for path in CA_BUNDLES if os.path.exists(path)), None)
    if bundle:
        with open(os.path.join(sys.prefix, "pip.conf"), "w", encoding="utf-8") as conf:
            conf.write("[global]\ncert = %s\n" % bundle)
    args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    return subprocess.call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    sys.exit(main())
