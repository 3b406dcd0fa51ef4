#!/usr/bin/env bash
# Runs ON the device machine (an NVIDIA H200 host lent by the workplace's `run` tool), from the repo root:
#   the wheels in .whl/ (ansible-core and its needs) are carried; torch is the image's own.
# Captures nvidia-smi outputs, runs gpu_facts/fabric_facts and the preflight role with -c local,
# and, when there are two or more GPUs, the NCCL all-reduce bench with NVLink multicast off.
# Everything lands in $OUT/captures.tar.gz (+ $OUT/summary.txt).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -z "${SKIP_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
export ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$PWD/.collections ANSIBLE_NOCOLOR=1
export ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr 'A-Z' 'a-z')
n=$(nvidia-smi -L | wc -l)
C=/tmp/captures/${gpu}-x${n}
mkdir -p "$C"
export CAPTURE_DIR=$C
fields=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,memory.free,compute_cap,power.limit,persistence_mode,mig.mode.current
nvidia-smi --query-gpu=$fields --format=csv > "$C/nvidia-smi-query.csv"
nvidia-smi -q -x > "$C/nvidia-smi-q.xml"
nvidia-smi -q > "$C/nvidia-smi-q.txt"
nvidia-smi topo -m > "$C/nvidia-smi-topo.txt" 2>&1
nvidia-smi > "$C/nvidia-smi.txt"
cat /proc/driver/nvidia/version > "$C/proc-driver-nvidia-version.txt"
{ cat /etc/os-release; uname -a; ls -la /sys/class/infiniband /sys/class/net; command -v ibdev2netdev; free -m; nproc; } > "$C/host-misc.txt" 2>&1
ip -j -4 addr show > "$C/ip-addr.json" 2>&1
python3 --version > "$C/versions.txt"; ansible --version >> "$C/versions.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' >> "$C/versions.txt" 2>&1
# The profile table the role gets from the catalog (data/catalog.yml) when the lookup exists; the module's own table otherwise.
python3 - > "$C/profiles.json" <<'PY'
import json, sys
sys.path.insert(0, ".collections")
try:
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog
    profiles = catalog.load_catalog()["profiles"]
    source = "data/catalog.yml"
except Exception as exc:  # catalog not written yet
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu
    profiles, source = gpu.DEFAULT_PROFILES, "module_utils/gpu.py DEFAULT_PROFILES (%s)" % exc
print(json.dumps({"preflight_profiles": profiles, "profiles_source": source}))
PY
inv=$C/inventory.ini
echo "localhost ansible_connection=local ansible_python_interpreter=$(command -v python3)" > "$inv"
t0=$(date +%s)
ansible-playbook -i "$inv" tests/harness/device/gpu_facts.yml -e @"$C/profiles.json" > "$C/ansible-gpu_facts.log" 2>&1
echo "gpu_facts playbook rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$C/summary.txt"
ansible-playbook -i "$inv" playbooks/preflight.yml -e @"$C/profiles.json" > "$C/preflight-refusal.log" 2>&1
echo "preflight (profile derived) rc=$?" | tee -a "$C/summary.txt"
ansible-playbook -i "$inv" playbooks/preflight.yml -e @"$C/profiles.json" -e preflight_profile=rtx_pro_6000 --check > "$C/preflight-refusal-rtx_pro_6000-check.log" 2>&1
echo "preflight (profile rtx_pro_6000, --check) rc=$?" | tee -a "$C/summary.txt"
ansible-playbook -i "$inv" playbooks/preflight.yml -e @"$C/profiles.json" -e preflight_profile=cpu -e preflight_image_gib=1 > "$C/preflight-cpu-standin.log" 2>&1
echo "preflight (profile cpu stand-in) rc=$?" | tee -a "$C/summary.txt"
grep -h -A6 'FAILED' "$C"/preflight-refusal*.log | tee -a "$C/summary.txt"
if [ "$n" -ge 2 ]; then
  for floor in 1 100000; do
    timeout 240 python3 -m torch.distributed.run --standalone --nproc-per-node "$n" roles/vllm_cluster/files/nccl_allreduce_bench.py \
      --sizes 1M,16M,64M,256M,1G,4G --iters 20 --warmup 5 --min-busbw-gbps $floor \
      --output "$C/nccl-allreduce-floor$floor.json" > "$C/nccl-allreduce-floor$floor.log" 2>&1
    echo "nccl bench floor=$floor rc=$?" | tee -a "$C/summary.txt"
  done
  NCCL_DEBUG=INFO timeout 120 python3 -m torch.distributed.run --standalone --nproc-per-node "$n" roles/vllm_cluster/files/nccl_allreduce_bench.py \
    --sizes 64M --iters 5 --warmup 1 > "$C/nccl-debug.log" 2>&1
  grep -E "NCCL version|Channel 00|via|NVLS" "$C/nccl-debug.log" | head -20 >> "$C/summary.txt"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("busbw", d["busbw_gbps"], "GB/s at", d["results"][-1]["size_bytes"], "bytes; peak", d["peak_busbw_gbps"])' "$C/nccl-allreduce-floor1.json" | tee -a "$C/summary.txt"
fi
cp "$C/summary.txt" "$OUT/summary.txt"
tar -C /tmp/captures -czf "$OUT/captures.tar.gz" .
