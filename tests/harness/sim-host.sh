# Shared by tests/harness/operator-host-up.sh and tests/harness/cluster-up.sh (sourced, not run): the parts of
# a test host that make Ansible reach it the way an operator reaches a DGX OS or Ubuntu machine — over SSH, as
# an ordinary login with password sudo, never as root.
#
#   sim_host_secrets STATE    the sudo password, a vault password, and STATE/become.vault.yml holding the sudo
#                             password as vault_operator_become_password (encrypted with STATE/vault-pass);
#                             the inventories read it as ansible_become_password, the tests pass
#                             -e @STATE/become.vault.yml --vault-password-file STATE/vault-pass
#   sim_host_wait_systemd C   wait until systemd in container C is up
#   sim_host_login C KEY      in container C: the login SIM_LOGIN (bash, in no privileged group) with KEY.pub
#                             authorized, sudo for it *with* the password, sshd refusing root and passwords
#   sim_host_ssh_ok ADDR KEY  true once SIM_LOGIN@ADDR answers over SSH with KEY
#
# Debian already has a group named operator, hence the login's name.
# shellcheck shell=bash
SIM_LOGIN="${SIM_LOGIN:-sparkop}"

sim_host_secrets() {
  local state="$1" python="$REPO/.venv/bin/python"
  (
    umask 077
    [[ -s "$state/become-password" ]] || "$python" -c 'import secrets; print(secrets.token_urlsafe(18))' >"$state/become-password"
    [[ -s "$state/vault-pass" ]] || "$python" -c 'import secrets; print(secrets.token_urlsafe(24))' >"$state/vault-pass"
    if [[ ! -s "$state/become.vault.yml" ]]; then
      printf -- '---\nvault_operator_become_password: "%s"\n' "$(cat "$state/become-password")" >"$state/become.vault.yml"
      "$REPO/.venv/bin/ansible-vault" encrypt --vault-password-file "$state/vault-pass" "$state/become.vault.yml" >/dev/null
    fi
  )
}

sim_host_wait_systemd() {
  local name="$1"
  for _ in $(seq 1 60); do
    docker exec "$name" systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded' && return 0
    sleep 0.5
  done
}

# The interpreter the bind-mounted environments point to lives under the controller's /root: the container's own
# /root is made traversable (0711) so that service accounts can execute it, where a real host would have a
# role-built venv under /opt. Only the password's hash enters the container.
sim_host_login() {
  local name="$1" key="$2" state="$3"
  docker exec -i "$name" bash -euo pipefail -c "
    chmod 0711 /root
    id $SIM_LOGIN >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $SIM_LOGIN
    install -d -m 0700 -o $SIM_LOGIN -g $SIM_LOGIN /home/$SIM_LOGIN/.ssh
    cat >/home/$SIM_LOGIN/.ssh/authorized_keys
    chown $SIM_LOGIN:$SIM_LOGIN /home/$SIM_LOGIN/.ssh/authorized_keys
    chmod 0600 /home/$SIM_LOGIN/.ssh/authorized_keys
    printf '%s ALL=(ALL:ALL) ALL\n' $SIM_LOGIN >/etc/sudoers.d/$SIM_LOGIN
    chmod 0440 /etc/sudoers.d/$SIM_LOGIN
    rm -f /root/.ssh/authorized_keys
    printf 'PermitRootLogin no\nPasswordAuthentication no\n' >/etc/ssh/sshd_config.d/sparkfleet.conf
    systemctl enable ssh >/dev/null 2>&1 || true
    systemctl restart ssh
  " <"$key.pub"
  printf '%s:%s\n' "$SIM_LOGIN" "$(cat "$state/become-password")" | docker exec -i "$name" chpasswd
}

sim_host_ssh_ok() {
  ssh -q -i "$2" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o ConnectTimeout=3 "$SIM_LOGIN@$1" true
}
